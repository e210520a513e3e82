//! The `map` stage: a jq program from the config changes documents, as a
//! batch through the runtime, in a pipeline through the binary, and under
//! the sandbox's limits when the program is hostile.

use std::time::Duration;

use serde_json::{Value, json};
use weir::plugin::PluginSpec;
use weir_tests::{doc, runtime, spec, with_plugins};

use crate::text_stages::issues;

/// What `spec`'s stage made of each of `inputs`, in one batch call: the
/// document's fields, `"DROP"`, or its error.
fn mapped(spec: PluginSpec, inputs: Vec<Value>) -> Vec<Result<Value, String>> {
    let plugin = runtime().load_stage("map", &spec).expect("load");
    let issues = plugin.check_config().expect("check_config");
    assert!(issues.is_empty(), "unexpected config issues: {issues:?}");
    let mut instance = plugin.instantiate().expect("instantiate");
    let mut docs: Vec<_> = inputs.into_iter().map(doc).collect();
    let outcomes = match instance.process_batch(&mut docs) {
        Ok(outcomes) => outcomes,
        // A trap: one document at a time, as a worker does.
        Err(_) => docs.iter_mut().map(|d| instance.process(d)).collect(),
    };
    docs.iter()
        .zip(outcomes)
        .map(|(d, o)| match o {
            Ok(_) if d.is_dropped() => Ok(json!("DROP")),
            Ok(_) => Ok(d.fields_json()),
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

fn map(config: Value, inputs: Vec<Value>) -> Vec<Result<Value, String>> {
    mapped(spec("map", config), inputs)
}

#[test]
fn a_program_sets_renames_deletes_computes_and_drops() {
    let program = r#"
        select(.status != "withdrawn")
        | .title |= ascii_downcase
        | .copy = .title
        | .tags |= (if type == "string" then split(";") else . end)
        | with_entries(if .key == "author" then .key = "authors" else . end)
        | .label = "\(.title) (\(.year // "n.d."))"
        | del(.draft)
    "#;
    let out = map(
        json!({ "jq": program }),
        vec![
            json!({ "id": "1", "title": "Emma", "tags": "a;b", "author": "JA", "year": 1815, "draft": true }),
            json!({ "id": "2", "title": "Gone", "status": "withdrawn" }),
            json!({ "id": "3", "title": 7 }),
            json!({ "id": "4", "title": "Dune", "tags": ["sf"] }),
        ],
    );
    assert_eq!(
        out[0].as_ref().expect("mapped"),
        &json!({ "title": "emma", "copy": "emma", "tags": ["a", "b"], "authors": "JA", "year": 1815, "label": "emma (1815)" })
    );
    assert_eq!(out[1], Ok(json!("DROP")));
    let failed = out[2].as_ref().expect_err("7 is not text");
    assert!(
        failed.contains("jq: cannot use 7 as string") && failed.contains("(in `select(.status"),
        "{failed}"
    );
    assert_eq!(
        out[3].as_ref().expect("mapped")["label"],
        json!("dune (n.d.)")
    );
}

#[test]
fn documents_the_fast_engine_leaves_to_jaq_come_out_as_jaq_makes_them() {
    // The program is in the fast engine's language; a decimal sum, a type
    // error and big integers are jaq's, document by document, in one batch.
    let out = map(
        json!({ "jq": ".n = .v + 1 | .t |= trim | .big = (.v | tostring)" }),
        vec![
            json!({ "id": "1", "v": 41, "t": " a " }),
            json!({ "id": "2", "v": 1.5, "t": " b " }),
            json!({ "id": "3", "v": "x", "t": " c " }),
            json!({ "id": "4", "t": " d " }),
            json!({ "id": "5", "v": 9223372036854775807_i64, "t": "e" }),
        ],
    );
    assert_eq!(
        out[0],
        Ok(json!({ "v": 41, "t": "a", "n": 42, "big": "41" }))
    );
    assert_eq!(
        out[1],
        Ok(json!({ "v": 1.5, "t": "b", "n": 2.5, "big": "1.5" }))
    );
    let failed = out[2].as_ref().expect_err("\"x\" + 1");
    assert!(
        failed.contains("jq: cannot calculate \"x\" + 1") && failed.contains("(in `.n = .v + 1"),
        "{failed}"
    );
    assert_eq!(out[3], Ok(json!({ "t": "d", "n": 1, "big": "null" })));
    let sum = &out[4].as_ref().expect("a big integer")["n"];
    assert_eq!(
        sum.to_string(),
        "9223372036854775808",
        "past 64 bits, jaq's big integer"
    );
}

#[test]
fn with_fields_named_the_program_sees_only_them() {
    let out = map(
        json!({ "jq": ".title |= ascii_upcase | .seen = (keys | join(\",\"))", "fields": ["title", "tags"] }),
        vec![json!({ "id": "1", "title": "a", "tags": "t", "body": "untouched" })],
    );
    assert_eq!(
        out[0].as_ref().expect("mapped"),
        &json!({ "title": "A", "tags": "t", "body": "untouched", "seen": "tags,title" })
    );
    // A named field the document lacks is not made up; one the program
    // removes is removed.
    let out = map(
        json!({ "jq": "del(.tags)", "fields": ["title", "tags"] }),
        vec![json!({ "id": "1", "tags": "t", "body": "b" })],
    );
    assert_eq!(out[0].as_ref().expect("mapped"), &json!({ "body": "b" }));
}

#[test]
fn what_a_program_may_not_give_fails_its_document_only() {
    let cases = [
        (".,.", "more than one value"),
        ("[.]", "gave [{"),
        (".id = \"other\"", "cannot change `id`"),
        ("del(.id)", "cannot remove `id`"),
        (".run_id = \"r\"", "`run_id` is the host's"),
        ("error(\"no \\(.id)\")", "jq: \"no bad\""),
        // jaq keeps NaN, which JSON has no word for: the host refuses it.
        (".x = nan", "invalid JSON: field `x`"),
        // jaq lets a number be an object key; JSON does not.
        (
            ".o = ({} | .[0] = 1)",
            "`o` would hold an object with the key 0",
        ),
    ];
    for (program, says) in cases {
        fails_only_its_document(|config| spec("map", config), program, says);
    }
}

/// A stage made by `spec` from a config running `program` on document
/// `bad` (and marking the others): `bad` fails, saying `says`, and the next
/// document is mapped.
fn fails_only_its_document(spec: impl Fn(Value) -> PluginSpec, program: &str, says: &str) {
    let config = json!({ "jq": format!("if .id == \"bad\" then {program} else .ok = true end") });
    let out = mapped(
        spec(config),
        vec![json!({ "id": "bad" }), json!({ "id": "good" })],
    );
    let failed = out[0].as_ref().expect_err(program);
    assert!(failed.contains(says), "{program}: {failed}");
    assert_eq!(
        out[1],
        Ok(json!({ "ok": true })),
        "{program}: the next document"
    );
}

#[test]
fn a_program_that_is_not_one_is_refused_at_its_place() {
    let found = issues("map", json!({ "jq": ".title |= ( | x" }));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("jq: line 1, column "), "{found:?}");
    assert!(found[0].contains("expected"), "{found:?}");
    let found = issues("map", json!({ "jq": ".a = nosuch(1)\n| .b = 2" }));
    assert_eq!(
        found,
        ["jq: line 1, column 6 (at `nosuch(1)\n| .b = 2`): no filter `nosuch`"]
    );
    let found = issues("map", json!({ "jq": ".", "fields": ["id"] }));
    assert!(found[0].starts_with("fields"), "{found:?}");
    let found = issues("map", json!({ "jq": "." , "feilds": [] }));
    assert!(found[0].contains("unknown field `feilds`"), "{found:?}");
}

/// A program that loops, recurses or grows without end is stopped by the
/// stage's limits: its document fails, saying which, and the next is mapped.
#[test]
fn a_hostile_program_is_stopped_by_the_sandbox() {
    let cases = [
        ("last(repeat(1))", "deadline"),
        ("def f: 1 + f; f", ""),
        ("[limit(100000000; repeat(.))] | {}", "memory"),
    ];
    for (program, says) in cases {
        let limited = |config| {
            let mut s = spec("map", config);
            s.limits.call_timeout = Some(Duration::from_secs(2));
            s.limits.memory_mib = Some(64);
            s
        };
        fails_only_its_document(limited, program, says);
    }
}

/// Through the binary: the stage in a pipeline, its cases passing, and a
/// bad program reported by `weir validate` at its line.
#[test]
fn map_runs_in_a_pipeline_and_validate_finds_a_bad_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |program: &str| {
        with_plugins(&format!(
            r#"
[[connectors]]
name = "c"
pipeline = "p"
plugin = {{ path = @test-connector, config = {{ count = 1 }} }}

[[pipelines]]
name = "p"

[[pipelines.stages]]
name = "tidy"
plugin = {{ path = @map, config = {{ jq = '{program}' }} }}

[indexer]
plugin = {{ path = @nop-indexer }}
"#
        ))
    };
    let path = dir.path().join("p.toml");
    std::fs::write(
        &path,
        config(r#"select(.keep) | .title |= ascii_downcase | del(.keep)"#),
    )
    .expect("config");
    std::fs::write(
        dir.path().join("p.cases.toml"),
        r#"
        [[cases]]
        name = "kept and lowercased"
        input = [{ id = "1", title = "EMMA", keep = true }, { id = "2", title = "X" }]
        expect = [{ document = { id = "1", title = "emma" } }, { event = "DROP", id = "2" }]
        "#,
    )
    .expect("cases");
    let (code, out) = crate::changes::weir(&["test", path.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 of 1 cases passed"), "{out}");

    std::fs::write(&path, config(".title |= (")).expect("config");
    let (code, out) = crate::changes::weir(&["validate", path.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{out}");
    let at = format!("{}:12:", path.display());
    assert!(
        out.contains(&at) && out.contains("pipelines.p.stages.tidy.plugin.config.jq: line 1"),
        "{out}"
    );
}
