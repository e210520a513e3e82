//! Each example stage, loaded through the runtime, and its effect on documents.

use serde_json::{Value, json};
use weir::core::document::Document;
use weir_tests::{doc, runtime, spec};

/// Run `stage` with `config` over `input`; return the document and children.
fn run(stage: &str, config: Value, input: Value) -> (Document, Vec<Document>) {
    let plugin = runtime()
        .load_stage(stage, &spec(stage, config))
        .expect("load");
    let issues = plugin.check_config().expect("check_config");
    assert!(issues.is_empty(), "unexpected config issues: {issues:?}");
    let mut instance = plugin.instantiate().expect("instantiate");
    let mut d = doc(input);
    let children = instance.process(&mut d).expect("process");
    (d, children)
}

fn fields(d: &Document) -> Value {
    d.fields_json()
}

#[test]
fn copy_fields_copies_single_and_multi_values() {
    let (d, _) = run(
        "copy-fields",
        json!({ "mappings": [
            { "source": "title", "target": "title_copy" },
            { "source": "tags", "target": "tags_copy" },
            { "source": "absent", "target": "never" },
        ]}),
        json!({ "id": "1", "title": "Weir", "tags": ["a", "b"] }),
    );
    assert_eq!(
        fields(&d),
        json!({ "title": "Weir", "tags": ["a", "b"], "title_copy": "Weir", "tags_copy": ["a", "b"] })
    );
}

#[test]
fn copy_fields_append_mode_adds_to_existing_values() {
    let (d, _) = run(
        "copy-fields",
        json!({ "mappings": [{ "source": "a", "target": "b" }], "mode": "append" }),
        json!({ "id": "1", "a": "x", "b": "y" }),
    );
    assert_eq!(d.fields()["b"], json!(["y", "x"]));
}

#[test]
fn rename_fields_moves_values() {
    let (d, _) = run(
        "rename-fields",
        json!({ "mappings": [{ "source": "name", "target": "title" }] }),
        json!({ "id": "1", "name": "Weir", "other": 1 }),
    );
    assert_eq!(fields(&d), json!({ "other": 1, "title": "Weir" }));
}

#[test]
fn concatenate_formats_fields_with_defaults() {
    let (d, _) = run(
        "concatenate",
        json!({ "target": "label", "format": "{first} {middle}{last} ({year}) {{x}}", "defaults": { "middle": "" } }),
        json!({ "id": "1", "first": "Ada", "last": "Lovelace" }),
    );
    assert_eq!(
        d.get_string("label").as_deref(),
        Some("Ada Lovelace ({year}) {x}")
    );
    for unclosed in ["x {raw", "{", "a {b} {c"] {
        let found = crate::text_stages::issues(
            "concatenate",
            json!({ "target": "label", "format": unclosed }),
        );
        assert!(
            found.len() == 1 && found[0].contains("is not closed"),
            "{unclosed}: {found:?}"
        );
    }
}

#[test]
fn set_static_values_respects_skip_mode() {
    let (d, _) = run(
        "set-static-values",
        json!({ "values": { "source": "catalog", "langs": ["en", "fr"], "kept": 2 }, "mode": "skip" }),
        json!({ "id": "1", "kept": 1 }),
    );
    assert_eq!(
        fields(&d),
        json!({ "kept": 1, "source": "catalog", "langs": ["en", "fr"] })
    );
}

#[test]
fn drop_document_drops_only_matching_documents() {
    let config = json!({ "field": "status", "values": ["deleted"] });
    let (dropped, _) = run(
        "drop-document",
        config.clone(),
        json!({ "id": "1", "status": ["live", "deleted"] }),
    );
    assert!(dropped.is_dropped());
    let (kept, _) = run(
        "drop-document",
        config,
        json!({ "id": "2", "status": "live" }),
    );
    assert!(!kept.is_dropped());
}

#[test]
fn apply_regex_extracts_capture_groups() {
    let (d, _) = run(
        "apply-regex",
        json!({ "source": "body", "target": "years", "pattern": "in (\\d{4})" }),
        json!({ "id": "1", "body": ["born in 1815, died in 1852", "nothing here"] }),
    );
    assert_eq!(d.fields()["years"], json!(["1815", "1852"]));
}

#[test]
fn apply_regex_reports_a_bad_pattern_before_start() {
    let plugin = runtime()
        .load_stage(
            "regex",
            &spec(
                "apply-regex",
                json!({ "source": "a", "target": "b", "pattern": "(" }),
            ),
        )
        .expect("load");
    let issues = plugin.check_config().expect("check_config");
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].path, "pattern");
    let err = plugin.instantiate().expect_err("start must fail");
    assert!(!err.is_document_error(), "{err}");
    assert!(err.to_string().contains("regex"), "{err}");
}

#[test]
fn trim_whitespace_keeps_shape() {
    let (d, _) = run(
        "trim-whitespace",
        json!({}),
        json!({ "id": "1", "a": "  x ", "b": [" y", "z "], "c": ["w "], "n": 3 }),
    );
    assert_eq!(
        fields(&d),
        json!({ "a": "x", "b": ["y", "z"], "c": ["w"], "n": 3 })
    );
}

#[test]
fn split_field_values_splits_and_trims() {
    let (d, _) = run(
        "split-field-values",
        json!({ "source": "tags", "delimiter": ";" }),
        json!({ "id": "1", "tags": "a; b;;c " }),
    );
    assert_eq!(d.fields()["tags"], json!(["a", "b", "c"]));
}

#[test]
fn emit_nested_children_makes_child_documents() {
    let mut input = doc(json!({ "id": "book", "chapters": [
        { "chapter_id": "c-1", "title": "One" },
        { "title": "Two", "id": "ignored" },
    ]}));
    input.set_run_id(Some("run-7".into()));
    let plugin = runtime()
        .load_stage(
            "children",
            &spec("emit-nested-children", json!({ "source": "chapters", "id_field": "chapter_id", "parent_field": "book_id" })),
        )
        .expect("load");
    let mut instance = plugin.instantiate().expect("instantiate");
    let children = instance.process(&mut input).expect("process");
    let ids: Vec<&str> = children.iter().map(Document::id).collect();
    assert_eq!(ids, ["c-1", "book-1"]);
    assert_eq!(children[1].get_string("title").as_deref(), Some("Two"));
    assert_eq!(children[1].get_string("book_id").as_deref(), Some("book"));
    assert!(
        children.iter().all(|c| c.run_id() == Some("run-7")),
        "children inherit the run id"
    );
    assert!(
        !input.has("chapters"),
        "the source field is removed from the parent"
    );
}

#[test]
fn config_errors_name_the_setting() {
    let plugin = runtime()
        .load_stage(
            "copy",
            &spec(
                "copy-fields",
                json!({ "mappings": [{ "source": "a", "targte": "b" }] }),
            ),
        )
        .expect("load");
    let issues = plugin.check_config().expect("check_config");
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "mappings[0].targte");
    assert!(issues[0].message.contains("targte"), "{issues:?}");

    let empty = runtime()
        .load_stage("copy", &spec("copy-fields", json!({ "mappings": [] })))
        .expect("load");
    let issues = empty.check_config().expect("check_config");
    assert_eq!(issues[0].path, "mappings");
}

#[test]
fn a_stage_instance_processes_many_documents() {
    let plugin = runtime()
        .load_stage(
            "copy",
            &spec(
                "copy-fields",
                json!({ "mappings": [{ "source": "n", "target": "m" }] }),
            ),
        )
        .expect("load");
    let mut instance = plugin.instantiate().expect("instantiate");
    for i in 0..1000 {
        let mut d = doc(json!({ "id": i.to_string(), "n": i }));
        instance.process(&mut d).expect("process");
        assert_eq!(d.get("m"), Some(&json!(i)));
    }
    assert_eq!(instance.restarts(), 0);
}
