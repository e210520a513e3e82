//! Pipeline tests: `weir test <config>` runs each example's cases, and a
//! failing case reports each difference by field.

use weir_tests::{repo_root, with_plugins};

use super::{example_in, weir};

#[test]
fn every_examples_pipeline_cases_pass() {
    let examples = repo_root().join("examples");
    let mut found = 0;
    for entry in std::fs::read_dir(&examples).expect("examples/") {
        let cases = entry.expect("an entry").path();
        let Some(name) = cases.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".cases.toml") else {
            continue;
        };
        found += 1;
        let dir = tempfile::tempdir().expect("tempdir");
        let config = example_in(&examples.join(format!("{stem}.toml")), dir.path());
        let (code, out) = weir(&[
            "test",
            config.to_str().expect("utf-8"),
            "--cases",
            cases.to_str().expect("utf-8"),
        ]);
        assert_eq!(code, 0, "{name}:\n{out}");
        assert!(out.contains("cases passed"), "{out}");
    }
    assert!(found > 0, "no examples/*.cases.toml");
}

#[test]
fn a_failing_pipeline_case_reports_each_difference_by_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("p.toml");
    std::fs::write(
        &config,
        with_plugins(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = @test-connector, config = { count = 1 } }
            [[pipelines]]
            name = "p"
            [[pipelines.stages]]
            name = "trim"
            plugin = { path = @trim-whitespace, config = { fields = ["title"] } }
            [[pipelines.stages]]
            name = "gone"
            plugin = { path = @drop-document, config = { field = "status", values = ["gone"] } }
            [indexer]
            plugin = { path = @nop-indexer }
            "#,
        ),
    )
    .expect("config");
    // Beside the config: found without --cases.
    std::fs::write(
        dir.path().join("p.cases.toml"),
        r#"
        [[cases]]
        name = "titles are trimmed"
        input = [{ id = "1", title = "  Emma  " }]
        expect = [{ document = { id = "1", title = "Emma" } }]

        [[cases]]
        name = "a wrong expectation"
        input = [{ id = "2", title = " Ivanhoe ", year = 1819 }, { id = "3", status = "gone" }]
        expect = [{ document = { id = "2", title = "IVANHOE", year = 1820 } }, { document = { id = "3" } }]

        [[cases]]
        name = "only the first stage"
        after = "trim"
        input = [{ id = "4", title = " x ", status = "gone" }]
        expect = [{ document = { id = "4", title = "x", status = "gone" } }]
        "#,
    )
    .expect("cases");
    let (code, out) = weir(&["test", config.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("ok      titles are trimmed"), "{out}");
    assert!(out.contains("ok      only the first stage"), "{out}");
    assert!(out.contains("FAILED  a wrong expectation"), "{out}");
    assert!(
        out.contains(r#"document.title: expected "IVANHOE", actual "Ivanhoe""#),
        "{out}"
    );
    assert!(
        out.contains("document.year: expected 1820, actual 1819"),
        "{out}"
    );
    assert!(
        out.contains(r#"expected: {"document":{"id":"3"}}"#)
            && out.contains(r#"actual:   {"event":"DROP","id":"3"}"#),
        "{out}"
    );
    assert!(out.contains("2 of 3 cases passed"), "{out}");

    // A case naming a stage the pipeline does not have is an invalid file.
    let bad = dir.path().join("bad.cases.toml");
    std::fs::write(
        &bad,
        "[[cases]]\nname = \"x\"\nbefore = \"nope\"\ninput = [{ id = \"1\" }]\n",
    )
    .expect("cases");
    let (code, out) = weir(&[
        "test",
        config.to_str().expect("utf-8"),
        "--cases",
        bad.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no stage `nope`"), "{out}");
}

/// A failure reads the same in a pipeline case as in a plugin test
/// (`error` and the plugin's own words), with the stage it happened in.
#[test]
fn a_failed_document_is_one_fail_line_in_cases_and_plugin_tests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("p.toml");
    std::fs::write(
        &config,
        with_plugins(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = @test-connector, config = { count = 1 } }
            [[pipelines]]
            name = "p"
            stages = [{ name = "h", plugin = { path = @hostile-stage } }]
            [indexer]
            plugin = { path = @nop-indexer }
            "#,
        ),
    )
    .expect("config");
    std::fs::write(
        dir.path().join("p.cases.toml"),
        r#"
        [[cases]]
        name = "a document the stage fails"
        input = [{ id = "1", action = "fail" }]
        expect = [{ event = "FAIL", id = "1", stage = "h", error = "document", message = "asked to fail" }]
        "#,
    )
    .expect("cases");
    let (code, out) = weir(&["test", config.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}");

    // The plugin test of the same stage says the same, without `stage`.
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"id\": \"1\", \"action\": \"fail\"}\n").expect("input");
    let expected = dir.path().join("expected.jsonl");
    std::fs::write(
        &expected,
        "{\"event\": \"FAIL\", \"id\": \"1\", \"error\": \"document\", \"message\": \"asked to fail\"}\n",
    )
    .expect("expected");
    let stage = with_plugins("@hostile-stage");
    let (code, out) = weir(&[
        "test",
        stage.trim_matches('"'),
        "--input",
        input.to_str().expect("utf-8"),
        "--expect",
        expected.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{out}");
}

/// Every mistake of a cases file is listed in one run, each at its file,
/// line and column.
#[test]
fn every_mistake_of_a_cases_file_is_listed_at_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("p.toml");
    std::fs::write(
        &config,
        with_plugins(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = @test-connector, config = { count = 1 } }
            [[pipelines]]
            name = "p"
            stages = [{ name = "trim", plugin = { path = @trim-whitespace, config = { fields = ["title"] } } }]
            [indexer]
            plugin = { path = @nop-indexer }
            "#,
        ),
    )
    .expect("config");
    let cases = dir.path().join("p.cases.toml");
    std::fs::write(
        &cases,
        "[[cases]]\n\
         name = \"one\"\n\
         before = \"nope\"\n\
         input = [{ id = \"1\" }]\n\
         \n\
         [[cases]]\n\
         name = \"two\"\n\
         inptu = [{ id = \"2\" }]\n\
         \n\
         [[cases]]\n\
         name = \"three\"\n\
         input = [{ title = \"no id\" }]\n",
    )
    .expect("cases");
    let (code, out) = weir(&["test", config.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{out}");
    let file = cases.display().to_string();
    for want in [
        format!("{file}:3:1: cases.one.before: pipeline `p` has no stage `nope` (it has: trim)"),
        format!("{file}:8:1: cases.two.inptu: unknown key `inptu`"),
        format!("{file}:12:1: cases.three.input: input[0] is not a document"),
    ] {
        assert!(out.contains(&want), "{want}\nin:\n{out}");
    }
    assert!(out.contains("4 configuration errors"), "{out}");
}
