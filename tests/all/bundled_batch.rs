//! The bundled stages as batch stages (contract 0.2.1, several fields per
//! call) do exactly what they did one document at a time: each is run on
//! the same edge-case documents beside its 0.2.0 build, kept in
//! `tests/fixtures/contract-0.2.0`, and the two must leave every document,
//! and every outcome, the same. Stages without a 0.2.0 build are checked on
//! the paths the batch versions changed.

use serde_json::{Value, json};
use weir::core::document::{Document, same_json};
use weir::plugin::{PluginError, PluginSpec};
use weir_tests::{doc, repo_root, runtime, spec};

/// What a stage left of a document and its outcome: the document's JSON
/// and children, or the kind of error (messages may name fields differently).
fn outcome_of(d: &Document, outcome: &Result<Vec<Document>, PluginError>) -> Value {
    let result = match outcome {
        Ok(children) => json!(children.iter().map(Document::to_json).collect::<Vec<_>>()),
        Err(e) => json!(format!("error: {}", e.kind())),
    };
    json!({ "document": d.to_json(), "dropped": d.is_dropped(), "outcome": result })
}

/// Run the 0.2.0 build of `fixture` a document at a time and the bundled
/// `stage` on the whole batch, with `config`, on copies of `inputs`; panic
/// naming the first document they treat differently.
fn same_as_0_2_0(fixture: &str, stage: &str, config: Value, inputs: &[Value]) {
    let old_path = repo_root()
        .join("tests/fixtures/contract-0.2.0")
        .join(format!("{fixture}.wasm"));
    let old = runtime()
        .load_stage("old", &PluginSpec::new(old_path, config.clone()))
        .expect("load the 0.2.0 build");
    let new = runtime()
        .load_stage("new", &spec(stage, config.clone()))
        .expect("load");
    assert!(!old.is_batch() && new.is_batch(), "{stage}: interfaces");
    let (mut old, mut new) = (
        old.instantiate().expect("instantiate"),
        new.instantiate().expect("instantiate"),
    );
    let mut old_docs: Vec<Document> = inputs.iter().cloned().map(doc).collect();
    let mut new_docs = old_docs.clone();
    let old_outcomes: Vec<_> = old_docs.iter_mut().map(|d| old.process(d)).collect();
    let new_outcomes = new.process_batch(&mut new_docs).expect("batch call");
    for (i, input) in inputs.iter().enumerate() {
        let (new, old) = (
            outcome_of(&new_docs[i], &new_outcomes[i]),
            outcome_of(&old_docs[i], &old_outcomes[i]),
        );
        // Numbers by value: the 0.2.0 builds rewrote a decimal they passed
        // through a `float` (`2.50` as `2.5`); see `trim_whitespace_...`.
        let clip = |v: &Value| v.to_string().chars().take(1500).collect::<String>();
        assert!(
            same_json(&new, &old),
            "{stage} with {config} on {}: batch and 0.2.0 differ:\n{}\n{}",
            clip(input),
            clip(&new),
            clip(&old)
        );
    }
}

/// Values that test a stage's handling of every shape a field can have.
fn edge_documents() -> Vec<Value> {
    let big: Value = serde_json::from_str("18446744073709551616").expect("number");
    let decimal: Value = serde_json::from_str("0.12345678901234567890123").expect("number");
    let written: Value = serde_json::from_str("2.50").expect("number");
    vec![
        json!({ "id": "text", "a": "  x ", "b": "y", "c": "\t tab\n", "d": "   " }),
        json!({ "id": "unicode", "a": "\u{a0}ünï\u{2003}", "b": " 😀 ", "c": "\"quoted\" " }),
        json!({ "id": "multi", "a": [" y", "z ", 3, null, { "k": " v " }], "b": ["w "], "c": ["p", "q"] }),
        json!({ "id": "numbers", "a": big, "b": decimal, "c": written, "d": [written, " t "] }),
        json!({ "id": "shapes", "a": null, "b": true, "c": { "x": " y " }, "d": [] }),
        json!({ "id": "empty" }),
        json!({ "id": "lists", "a": "one;two; three ;;", "b": ["a;b", " c ;d"], "c": [1, "x;y"], "d": 12 }),
    ]
}

#[test]
fn trim_whitespace_as_a_batch_stage_trims_as_before() {
    for config in [
        json!({}),
        json!({ "fields": ["a", "c", "missing"] }),
        json!({ "fields": ["d", "b"] }),
    ] {
        same_as_0_2_0(
            "trim_whitespace",
            "trim-whitespace",
            config,
            &edge_documents(),
        );
    }
    // Where it trims a multi-valued field, its numbers keep their text (the
    // 0.2.0 build wrote `2.50` back as `2.5`).
    let parse = |text: &str| doc(serde_json::from_str(text).expect("json"));
    let d = run_on(
        "trim-whitespace",
        json!({}),
        parse(r#"{ "id": "1", "d": [2.50, " t ", 1e400] }"#),
    );
    let written = parse(r#"{ "id": "1", "d": [2.50, "t", 1e400] }"#);
    assert_eq!(
        serde_json::to_string(&d.fields()["d"]).expect("json"),
        serde_json::to_string(&written.fields()["d"]).expect("json"),
    );
    assert!(
        serde_json::to_string(&d.fields()["d"])
            .expect("json")
            .starts_with("[2.50,")
    );
}

/// More fields than the host reads or changes in one call: the SDK splits
/// the calls, and every field is still trimmed.
#[test]
fn trim_whitespace_trims_a_document_of_more_fields_than_one_call_takes() {
    let mut fields = serde_json::Map::new();
    fields.insert("id".into(), json!("wide"));
    for i in 0..5000 {
        fields.insert(format!("f{i}"), json!(format!(" {i} ")));
    }
    same_as_0_2_0(
        "trim_whitespace",
        "trim-whitespace",
        json!({}),
        &[Value::Object(fields.clone())],
    );
    // Every field, and the same fields named: past 4,096 names the batch
    // reads each document on its own.
    let names: Vec<String> = (0..5000).map(|i| format!("f{i}")).collect();
    for config in [json!({}), json!({ "fields": names })] {
        let d = run("trim-whitespace", config, Value::Object(fields.clone()));
        assert_eq!(
            (&d.fields()["f0"], &d.fields()["f4999"]),
            (&json!("0"), &json!("4999"))
        );
    }
}

#[test]
fn copy_fields_as_a_batch_stage_copies_as_before() {
    let mappings = [
        json!([{ "source": "a", "target": "t" }, { "source": "b", "target": "u" }]),
        // Two sources into one target.
        json!([{ "source": "a", "target": "t" }, { "source": "c", "target": "t" }]),
        // A target that a later mapping reads.
        json!([{ "source": "a", "target": "t" }, { "source": "c", "target": "t" }, { "source": "t", "target": "v" }]),
        // Onto fields that exist, and from ones that do not.
        json!([{ "source": "a", "target": "b" }, { "source": "missing", "target": "c" }, { "source": "d", "target": "a" }]),
        // A reserved target fails the document after the copies before it.
        json!([{ "source": "a", "target": "t" }, { "source": "b", "target": "id" }, { "source": "c", "target": "u" }]),
    ];
    for mode in ["overwrite", "append", "skip"] {
        for m in &mappings {
            let config = json!({ "mappings": m, "mode": mode });
            same_as_0_2_0("copy_fields", "copy-fields", config, &edge_documents());
        }
    }
}

#[test]
fn split_field_values_as_a_batch_stage_splits_as_before() {
    for config in [
        json!({ "source": "a", "delimiter": ";" }),
        json!({ "source": "b", "target": "parts", "delimiter": ";", "trim": false }),
        json!({ "source": "c", "target": "id", "delimiter": ";" }),
        json!({ "source": "d", "delimiter": "1" }),
    ] {
        same_as_0_2_0(
            "split_field_values",
            "split-field-values",
            config,
            &edge_documents(),
        );
    }
}

/// Run the bundled `stage` with `config` on `input` as a batch of one.
fn run(stage: &str, config: Value, input: Value) -> Document {
    run_on(stage, config, doc(input))
}

fn run_on(stage: &str, config: Value, mut input: Document) -> Document {
    let mut instance = runtime()
        .load_stage(stage, &spec(stage, config))
        .expect("load")
        .instantiate()
        .expect("instantiate");
    instance.process(&mut input).expect("process");
    input
}

#[test]
fn apply_regex_appends_more_matches_than_one_update_call_takes() {
    let body = "a@b ".repeat(5000);
    let d = run(
        "apply-regex",
        json!({ "source": "body", "target": "emails", "pattern": "\\w@\\w", "mode": "append" }),
        json!({ "id": "1", "body": body, "emails": "first@x" }),
    );
    let emails = d.fields()["emails"].as_array().expect("multi-valued");
    assert_eq!(emails.len(), 5001);
    assert_eq!(
        (&emails[0], &emails[5000]),
        (&json!("first@x"), &json!("a@b"))
    );
}

#[test]
fn apply_regex_skip_mode_leaves_an_existing_target() {
    let config =
        json!({ "source": "body", "target": "emails", "pattern": "\\w+@\\w+", "mode": "skip" });
    let kept = run(
        "apply-regex",
        config.clone(),
        json!({ "id": "1", "body": "ada@example", "emails": null }),
    );
    assert_eq!(kept.fields()["emails"], Value::Null);
    let set = run(
        "apply-regex",
        config,
        json!({ "id": "2", "body": "ada@example" }),
    );
    assert_eq!(set.fields()["emails"], json!("ada@example"));
}

#[test]
fn concatenate_reads_each_field_as_get_string_does() {
    let input = json!({
        "id": "1",
        "first": ["Ada", "Augusta"],
        "middle": [null, "x"],
        "n": serde_json::from_str::<Value>("2.50").expect("number"),
        "o": { "k": [1, "a"] },
    });
    let host = doc(input.clone());
    let text = |name: &str| host.get_string(name).unwrap_or_else(|| format!("<{name}>"));
    let d = run(
        "concatenate",
        json!({ "target": "label", "format": "{first}|{middle}|{n}|{o}|{first}", "defaults": { "middle": "<middle>" } }),
        input,
    );
    assert_eq!(
        d.get_string("label"),
        Some(format!(
            "{}|{}|{}|{}|{}",
            text("first"),
            text("middle"),
            text("n"),
            text("o"),
            text("first")
        ))
    );
}

#[test]
fn set_static_values_appends_and_skips_per_field() {
    let appended = run(
        "set-static-values",
        json!({ "values": { "tags": ["a", "b"], "n": 1 }, "mode": "append" }),
        json!({ "id": "1", "tags": "x" }),
    );
    assert_eq!(
        appended.fields_json(),
        json!({ "tags": ["x", "a", "b"], "n": [1] })
    );
    let skipped = run(
        "set-static-values",
        json!({ "values": { "a": 1, "b": 2, "c": [] }, "mode": "skip" }),
        json!({ "id": "2", "b": null }),
    );
    assert_eq!(skipped.fields_json(), json!({ "b": null, "a": 1, "c": [] }));
}
