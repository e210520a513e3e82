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
