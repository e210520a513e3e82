//! Batch stages (contract 0.2.1): every shape of `process-batch`'s answer,
//! a poison document in a batch, 0.2.0 and 0.2.1 plugins in one pipeline,
//! per-id order, and how long a worker waits to fill a batch.
//!
//! `batch-probe` (plugins/testing) is a batch stage written against the
//! bare WIT, so each shape can be produced on purpose.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use weir::core::document::Document;
use weir::core::event::EventKind;
use weir::plugin::PluginError;
use weir::run::{RunResult, RunStatus, Runner};
use weir::testing::recording::{Recording, RecordingMessengers};
use weir_tests::{config, doc, repo_root, runtime, spec};

/// A 0.2.0 build of a bundled Rust stage, kept in `tests/fixtures`.
fn contract_0_2_0(name: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/contract-0.2.0")
        .join(format!("{name}.wasm"))
}

fn probe() -> weir::plugin::StageInstance {
    let plugin = runtime()
        .load_stage("probe", &spec("batch-probe", json!({})))
        .expect("load");
    assert!(plugin.is_batch(), "the probe exports stage-batch-api");
    plugin.instantiate().expect("instantiate")
}

fn acting(id: &str, act: &str) -> Document {
    doc(json!({ "id": id, "act": act }))
}

pub(crate) fn field(d: &Document, name: &str) -> Value {
    d.fields().get(name).cloned().unwrap_or(Value::Null)
}

pub(crate) fn message(outcome: &Result<Vec<Document>, PluginError>) -> String {
    match outcome {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected a failure"),
    }
}

#[test]
fn each_document_of_a_batch_has_its_own_outcome() {
    let mut probe = probe();
    let acts = [
        "ok",
        "fail",
        "transient",
        "fatal",
        "drop",
        "skip",
        "child",
        "self-child",
        "set-many",
    ];
    let mut docs: Vec<Document> = acts
        .iter()
        .enumerate()
        .map(|(i, act)| acting(&format!("d{i}"), act))
        .collect();
    let outcomes = probe
        .process_batch(&mut docs)
        .expect("the call itself succeeds");
    assert_eq!(outcomes.len(), acts.len());
    for d in &docs {
        assert_eq!(
            field(d, "batch_size"),
            json!(acts.len()),
            "one call for all"
        );
    }
    assert!(outcomes[0].as_ref().is_ok_and(Vec::is_empty));
    assert!(
        matches!(&outcomes[1], Err(PluginError::Document { transient: false, message, .. }) if message == "failed on purpose")
    );
    assert!(matches!(
        &outcomes[2],
        Err(PluginError::Document {
            transient: true,
            ..
        })
    ));
    assert!(matches!(&outcomes[3], Err(PluginError::Fatal { .. })));
    assert!(docs[4].is_dropped() && outcomes[4].is_ok());
    assert!(docs[5].skips_stages() && outcomes[5].is_ok());
    let children = outcomes[6].as_ref().expect("children");
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].id(), "d6-child");
    // A document of the batch handed on as a child is a copy: the document
    // itself stays, changed as the stage left it.
    let copies = outcomes[7].as_ref().expect("its own child");
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].id(), "d7");
    assert_eq!(docs[7].id(), "d7");
    assert_eq!(field(&docs[7], "visits"), json!([1]));
    // Several fields in one `update`, read back with one `get-json-many`.
    assert!(outcomes[8].is_ok());
    assert_eq!(field(&docs[8], "a"), json!([1, 2]));
    assert_eq!(field(&docs[8], "b"), json!("two"));
    assert_eq!(field(&docs[8], "read"), json!("[1,2] \"two\" absent"));
}

#[test]
fn a_stage_that_exports_both_interfaces_is_called_through_the_batch() {
    let mut probe = probe();
    let mut one = acting("a", "ok");
    probe.process(&mut one).expect("processed");
    assert_eq!(
        field(&one, "called"),
        Value::Null,
        "process-document never ran"
    );
    assert_eq!(field(&one, "batch_size"), json!(1), "a batch of one");
}

#[test]
fn reads_and_changes_of_many_fields_are_bounded() {
    let mut probe = probe();
    let flood = probe.process(&mut acting("a", "read-flood"));
    assert!(
        message(&flood).contains("asked for 5000 fields in one call, more than the 4096"),
        "{}",
        message(&flood)
    );
    // Under the count, the answer is bounded by what a document may hold.
    let mut big = doc(json!({ "id": "b", "act": "big-read", "big": "x".repeat(8 << 10) }));
    let big = probe.process(&mut big);
    assert!(
        message(&big).contains("bytes of fields in one call, more than a document may hold"),
        "{}",
        message(&big)
    );
    let changes = probe.process(&mut acting("c", "many-changes"));
    assert!(
        message(&changes).contains("5000 changes in one update, more than the 4096"),
        "{}",
        message(&changes)
    );
    // The instance goes on serving (a refused read traps it; a new one is made).
    probe
        .process(&mut acting("d", "ok"))
        .expect("the next document");
}

#[test]
fn batch_wide_calls_change_and_read_each_document_of_the_batch() {
    let mut probe = probe();
    let mut docs = vec![
        acting("a", "each"),
        acting("b", "each-refused"),
        acting("c", "each-read"),
        acting("d", "each"),
    ];
    let outcomes = probe.process_batch(&mut docs).expect("answered");
    assert!(outcomes[0].is_ok() && outcomes[2].is_ok() && outcomes[3].is_ok());
    // The refused change fails its own document, after the change before it.
    assert!(
        message(&outcomes[1]).contains("ReservedField"),
        "{}",
        message(&outcomes[1])
    );
    assert_eq!(field(&docs[1], "batch_size"), json!(4));
    assert_eq!(field(&docs[1], "instance_calls"), Value::Null);
    assert_eq!(docs[1].id(), "b");
    for d in [&docs[0], &docs[2], &docs[3]] {
        assert_eq!(field(d, "batch_size"), json!(4), "{}", d.id());
        assert_eq!(field(d, "visits"), json!([1]), "{}", d.id());
    }
    // What one `update-each` wrote, read back by one `get-json-each`.
    assert_eq!(field(&docs[2], "read"), json!("\"each-read\" 4 absent"));
}

#[test]
fn batch_wide_calls_that_ask_for_too_much_stop_the_call() {
    let mut probe = probe();
    let big = doc(json!({ "id": "b", "act": "each-big", "big": "x".repeat(8 << 10) }));
    for (mut d, expected) in [
        (
            acting("a", "each-flood"),
            "5000 field names in one call, more than the 4096",
        ),
        (
            big,
            "bytes of fields in one call, more than the documents read hold",
        ),
        (
            acting("c", "each-changes"),
            "69632 changes in one call, more than the 65536",
        ),
    ] {
        let outcome = probe.process(&mut d);
        assert!(
            message(&outcome).contains(expected),
            "{}",
            message(&outcome)
        );
    }
    probe
        .process(&mut acting("d", "each"))
        .expect("the next document");
}

#[test]
fn a_batch_that_traps_after_update_each_comes_back_as_it_was() {
    let mut probe = probe();
    let before = vec![
        doc(json!({ "id": "a", "act": "each", "batch_size": "old" })),
        acting("b", "each"),
        acting("c", "each-trap"),
    ];
    let mut docs = before.clone();
    let error = probe.process_batch(&mut docs).expect_err("the call traps");
    assert!(matches!(error, PluginError::Trap { .. }), "{error}");
    assert_eq!(docs, before);
}

#[test]
fn a_whole_batch_error_or_a_wrong_count_fails_every_document() {
    let mut probe = probe();
    let mut docs = vec![acting("a", "ok"), acting("b", "batch-error")];
    let outcomes = probe.process_batch(&mut docs).expect("answered");
    assert!(outcomes.iter().all(|o| matches!(
        o,
        Err(PluginError::Document { transient: true, message, .. }) if message == "the whole batch failed"
    )));

    let mut docs = vec![acting("a", "ok"), acting("b", "short"), acting("c", "ok")];
    let outcomes = probe.process_batch(&mut docs).expect("answered");
    assert_eq!(outcomes.len(), 3);
    for outcome in &outcomes {
        assert!(
            message(outcome).contains("answered 2 outcomes for a batch of 3 documents"),
            "{}",
            message(outcome)
        );
    }
}

#[test]
fn a_trapped_batch_comes_back_as_it_was_and_one_document_traps_alone() {
    let mut probe = probe();
    let mut docs = vec![acting("a", "ok"), acting("b", "trap"), acting("c", "ok")];
    let error = probe.process_batch(&mut docs).expect_err("the call traps");
    assert!(matches!(error, PluginError::Trap { .. }), "{error}");
    // Each document is back as it was before the call, though the probe
    // changed `a` before it reached `b`.
    assert_eq!(docs[0], acting("a", "ok"));
    assert_eq!(docs[2], acting("c", "ok"));
    // Alone, the poison document fails only itself.
    let mut alone = acting("b", "trap");
    let outcome = probe.process(&mut alone);
    assert!(matches!(outcome, Err(PluginError::Trap { .. })));
}

#[test]
fn a_handle_kept_past_its_call_never_reaches_a_later_document() {
    let mut probe = probe();
    let mut first = vec![acting("a", "keep")];
    probe.process_batch(&mut first).expect("answered")[0]
        .as_ref()
        .expect("kept");
    let mut second = vec![acting("b", "ok")];
    probe.process_batch(&mut second).expect("answered")[0]
        .as_ref()
        .expect("processed");
    // The instance that kept a handle was replaced: the next call is the
    // first of a new one.
    assert_eq!(field(&second[0], "instance_calls"), json!(1));
    assert_eq!(
        first[0].id(),
        "a",
        "the kept document came back to the host"
    );
}

/// A local run of `toml` with a recording messenger.
pub(crate) fn run(toml: &str) -> (RunResult, Arc<Recording>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let messengers = RecordingMessengers::new(64);
    let recording = messengers.recording();
    let result = Runner::new(config(toml, dir.path()), runtime(), Arc::new(messengers))
        .run()
        .unwrap_or_else(|e| panic!("config should be valid: {e}"));
    (result, recording)
}

/// A pipeline of `stages` over the test connector's `docs`, with `extra`
/// settings before the connector.
fn pipeline(docs: &[Value], stages: &str, extra: &str) -> String {
    let docs: Vec<String> = docs
        .iter()
        .map(|d| {
            let fields: Vec<String> = d
                .as_object()
                .expect("object")
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        })
        .collect();
    format!(
        r#"
        {extra}
        [indexer]
        batch_timeout = "10ms"
        plugin = {{ path = @test-indexer, config = {{}} }}
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ docs = [{}] }} }}
        [[pipelines]]
        name = "p"
        stages = [{stages}]
        "#,
        docs.join(", ")
    )
}

#[test]
fn a_poison_document_in_a_batch_fails_only_itself_in_a_run() {
    let docs: Vec<Value> = (0..6)
        .map(|i| json!({ "id": format!("d{i}"), "act": if i == 3 { "trap" } else { "ok" } }))
        .collect();
    let stages = r#"{ name = "probe", plugin = { path = @batch-probe }, batch = { size = 16, wait = "2s" } }"#;
    let (result, recording) = run(&pipeline(&docs, stages, "[worker]\nthreads = 1"));
    assert_eq!(result.connectors[0].failed, 1, "{result:?}");
    assert_eq!(result.connectors[0].succeeded, 5, "{result:?}");
    let failed = recording.failed();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0.id(), "d3");
    assert!(
        failed[0].1.message.contains("panicked") || failed[0].1.message.contains("trap"),
        "{}",
        failed[0].1.message
    );
    assert_eq!(
        failed[0].1.attempts, 1,
        "retry_traps is off: one call alone"
    );
    for d in recording.sent_for_indexing() {
        // Each ran once from where it started: the trapped call left no trace.
        assert_eq!(field(&d, "visits"), json!([1]), "{}", d.id());
    }
}

#[test]
fn a_batch_past_its_deadline_fails_only_the_document_that_spins() {
    let docs: Vec<Value> = (0..4)
        .map(|i| json!({ "id": format!("d{i}"), "act": if i == 1 { "spin" } else { "ok" } }))
        .collect();
    let stages = r#"{ name = "probe", plugin = { path = @batch-probe, limits = { call_timeout = "300ms" } }, batch = { size = 16, wait = "1s" } }"#;
    let (result, recording) = run(&pipeline(&docs, stages, "[worker]\nthreads = 1"));
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (3, 1),
        "{result:?}"
    );
    let failed = recording.failed();
    assert_eq!(failed[0].0.id(), "d1");
    assert!(
        failed[0].1.message.contains("deadline") || failed[0].1.message.contains("call_timeout"),
        "{}",
        failed[0].1.message
    );
    for d in recording.sent_for_indexing() {
        assert_eq!(field(&d, "visits"), json!([1]), "{}", d.id());
    }
}

#[test]
fn document_and_batch_stages_of_both_contracts_share_a_pipeline() {
    let docs: Vec<Value> = (0..20)
        .map(|i| json!({ "id": format!("d{i}"), "title": format!("  title {i}  ") }))
        .collect();
    let copy = contract_0_2_0("copy_fields").display().to_string();
    let stages = format!(
        r#"{{ name = "trim", plugin = {{ path = @trim-whitespace, config = {{ fields = ["title"] }} }} }},
           {{ name = "copy", plugin = {{ path = {copy:?}, config = {{ mappings = [{{ source = "title", target = "title_copy" }}] }} }} }},
           {{ name = "probe", plugin = {{ path = @batch-probe }}, batch = {{ size = 8, wait = "1s" }} }}"#
    );
    let (result, recording) = run(&pipeline(&docs, &stages, "[worker]\nthreads = 2"));
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let indexed = recording.sent_for_indexing();
    assert_eq!(indexed.len(), 20);
    for d in &indexed {
        let n = &d.id()[1..];
        assert_eq!(field(d, "title"), json!(format!("title {n}")));
        assert_eq!(field(d, "title_copy"), json!(format!("title {n}")));
        let size = field(d, "batch_size").as_u64().expect("batch size");
        assert!((1..=8).contains(&size), "{size}");
    }
    assert!(
        indexed
            .iter()
            .any(|d| field(d, "batch_size").as_u64() > Some(1)),
        "the batch stage got batches"
    );
}

#[test]
fn versions_of_one_id_keep_their_order_through_batches_and_workers() {
    let docs: Vec<Value> = (0..300)
        .map(|i| json!({ "id": format!("id{}", i % 7), "v": i }))
        .collect();
    let stages = r#"{ name = "probe", plugin = { path = @batch-probe }, batch = { size = 5, wait = "50ms" } }"#;
    let (result, recording) = run(&pipeline(&docs, stages, "[worker]\nthreads = 3"));
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let mut last = std::collections::HashMap::new();
    for d in recording.sent_for_indexing() {
        let v = field(&d, "v").as_i64().expect("v");
        let before = last.insert(d.id().to_owned(), v);
        assert!(before < Some(v), "{} went {before:?} -> {v}", d.id());
    }
    assert_eq!(last.len(), 7);
}

#[test]
fn a_worker_waits_at_most_batch_wait_to_fill_a_batch() {
    // 40 documents a second after a first second's worth at once (the
    // throttle's burst): one every 25 ms from the 41st on. A batch that may
    // wait 100 ms gathers about 4 of those (never the 1,000 its size
    // allows); one that may not wait at all takes what is there, about 1.
    let docs: Vec<Value> = (0..64).map(|i| json!({ "id": format!("d{i}") })).collect();
    let sizes = |wait: &str| {
        let stages = format!(
            r#"{{ name = "probe", plugin = {{ path = @batch-probe }}, batch = {{ size = 1000, wait = "{wait}" }} }}"#
        );
        let extra = "[worker]\nthreads = 1\n[publisher]\nmax_docs_per_second = 40";
        let (result, recording) = run(&pipeline(&docs, &stages, extra));
        assert_eq!(result.status(), RunStatus::Success, "{result:?}");
        recording
            .sent_for_indexing()
            .iter()
            .filter(|d| d.id()[1..].parse::<u32>().expect("number") >= 44)
            .map(|d| field(d, "batch_size").as_u64().expect("size"))
            .collect::<Vec<_>>()
    };
    let waiting = sizes("100ms");
    assert!(waiting.iter().all(|&s| s <= 8), "{waiting:?}");
    assert!(waiting.iter().any(|&s| s >= 2), "{waiting:?}");
    let eager = sizes("0s");
    assert!(eager.iter().all(|&s| s <= 2), "{eager:?}");
}

#[test]
fn a_fatal_error_in_a_batch_leaves_no_document_without_an_outcome() {
    let docs = [
        json!({ "id": "a" }),
        json!({ "id": "b", "act": "fatal" }),
        json!({ "id": "c" }),
    ];
    let stages = r#"{ name = "probe", plugin = { path = @batch-probe }, batch = { size = 8, wait = "2s" } },
                    { name = "trim", plugin = { path = @trim-whitespace, config = { fields = ["title"] } } }"#;
    let (result, recording) = run(&pipeline(&docs, stages, "[worker]\nthreads = 1"));
    assert_ne!(result.status(), RunStatus::Success, "{result:?}");
    let events = recording.events();
    for id in ["a", "b", "c"] {
        assert!(
            events
                .iter()
                .any(|e| e.document_id == id
                    && matches!(e.kind, EventKind::Finish | EventKind::Fail)),
            "{id} has no outcome: {events:?}"
        );
    }
    let failed = recording.failed();
    let not_processed = failed
        .iter()
        .filter(|(_, f)| f.message.contains("not processed"))
        .count();
    assert_eq!(not_processed, 2, "{failed:?}");
}
