//! Batches lent by position (`stage-lent-api`, contract 0.2.1): every shape
//! of `process-lent`'s answer, handles asked for one document, a poison
//! document, and what the batch's reads and changes do.
//!
//! `lent-probe` (plugins/testing) exports the `lent-stage` world against the
//! bare WIT, so each shape can be produced on purpose. The Python and
//! JavaScript SDKs' stages run on this path too: the conformance suite
//! covers them.

use serde_json::{Value, json};

use super::batch::{field, message};
use weir::core::document::Document;
use weir::plugin::PluginError;
use weir_tests::{doc, runtime, spec};

fn probe() -> weir::plugin::StageInstance {
    let plugin = runtime()
        .load_stage("lent-probe", &spec("lent-probe", json!({})))
        .expect("load");
    assert!(plugin.is_batch(), "the probe exports stage-batch-api");
    plugin.instantiate().expect("instantiate")
}

fn batch(acts: &[&str]) -> Vec<Document> {
    acts.iter()
        .enumerate()
        .map(|(i, act)| doc(json!({ "id": format!("d{i}"), "act": act })))
        .collect()
}

#[test]
fn a_lent_batch_is_read_and_changed_by_position_with_its_own_outcomes() {
    let mut probe = probe();
    let acts = ["ok", "fail", "transient", "child", "drop", "refused", "ok"];
    let mut docs = batch(&acts);
    let outcomes = probe.process_batch(&mut docs).expect("the call succeeds");
    assert_eq!(outcomes.len(), acts.len());
    for (at, d) in docs.iter().enumerate() {
        assert_eq!(
            field(d, "called"),
            Value::Null,
            "process-lent, not process-batch"
        );
        assert_eq!(
            field(d, "batch_size"),
            json!(acts.len()),
            "one call for all"
        );
        if acts[at] != "refused" {
            assert_eq!(field(d, "position"), json!(at));
            assert_eq!(field(d, "listed_id"), json!(format!("d{at}")));
        }
    }
    // Left out of the answer: done, with no children.
    assert!(outcomes[0].as_ref().is_ok_and(Vec::is_empty));
    assert!(outcomes[6].as_ref().is_ok_and(Vec::is_empty));
    assert!(
        message(&outcomes[1]).contains("failed d1"),
        "{}",
        message(&outcomes[1])
    );
    assert!(
        matches!(&outcomes[2], Err(PluginError::Document { transient: true, message, .. }) if message.contains("transient d2")),
        "{:?}",
        outcomes[2]
    );
    let children = outcomes[3].as_ref().expect("child");
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].id(), "d3-child");
    // A handle asked for one document changes that document only.
    assert!(outcomes[4].is_ok() && docs[4].is_dropped());
    assert!(
        docs.iter()
            .enumerate()
            .all(|(i, d)| d.is_dropped() == (i == 4))
    );
    // A refused change stops that document's changes, answered by position.
    let refused = message(&outcomes[5]);
    assert!(
        refused.contains("refused") && refused.contains("ReservedField"),
        "{refused}"
    );
    assert_eq!(docs[5].id(), "d5");
    assert_eq!(
        field(&docs[5], "batch_size"),
        json!(acts.len()),
        "changes before it made"
    );
}

#[test]
fn an_answer_that_cannot_be_trusted_fails_every_document() {
    for (act, says) in [
        ("beyond", "for document 3 of a batch of 3"),
        ("twice", "two outcomes for document 1"),
    ] {
        let mut probe = probe();
        let mut docs = batch(&["ok", act, "ok"]);
        let outcomes = probe.process_batch(&mut docs).expect("the call succeeds");
        for outcome in &outcomes {
            let text = message(outcome);
            assert!(text.contains(says), "{act}: {text}");
        }
    }
}

#[test]
fn a_poison_document_of_a_lent_batch_fails_only_itself() {
    for act in ["trap", "past"] {
        let mut probe = probe();
        let mut docs = batch(&["ok", act, "ok"]);
        let error = probe
            .process_batch(&mut docs)
            .expect_err("a trap fails the whole call");
        assert!(!error.to_string().is_empty());
        // Back as they were, each to be run again by itself.
        assert!(docs.iter().all(|d| d.fields().get("batch_size").is_none()));
        let alone: Vec<_> = docs.iter_mut().map(|d| probe.process(d)).collect();
        assert!(alone[0].is_ok() && alone[2].is_ok(), "{act}: {alone:?}");
        let poison = message(&alone[1]);
        if act == "past" {
            assert!(
                poison.contains("asked for document 1 of a batch of 1"),
                "{poison}"
            );
        }
        assert_eq!(field(&docs[0], "batch_size"), json!(1));
    }
}

#[test]
fn a_handle_kept_past_the_call_costs_the_instance_not_the_documents() {
    let mut probe = probe();
    let mut docs = batch(&["keep", "ok"]);
    let outcomes = probe.process_batch(&mut docs).expect("the call succeeds");
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(probe.restarts(), 0);
    // The next call runs on a new instance, and the documents are whole.
    let mut next = batch(&["ok"]);
    let outcomes = probe.process_batch(&mut next).expect("next call");
    assert!(outcomes[0].is_ok());
    assert_eq!(field(&next[0], "batch_size"), json!(1));
    assert_eq!(field(&docs[0], "position"), json!(0));
}

/// Every handle the contract allows (16 on each document of the largest
/// batch, 4,096 documents) is one the engine gives: a batch that holds them
/// all at once succeeds, and one more on a document is refused by the
/// host's own bound, named, before wasmtime's store-wide handle cap.
#[test]
fn every_handle_the_contract_allows_on_a_lent_batch_is_given() {
    let mut probe = probe();
    let size = weir::config::StageBatch::MAX_SIZE;
    let mut docs = batch(&vec!["hold"; size]);
    let outcomes = probe
        .process_batch(&mut docs)
        .expect("16 handles on each of 4,096 documents fit");
    assert_eq!(outcomes.len(), size);
    assert!(outcomes.iter().all(Result::is_ok), "{:?}", outcomes.first());
    assert_eq!(probe.restarts(), 0);

    let mut acts = vec!["hold"; size];
    acts[size - 1] = "hold-more";
    let mut docs = batch(&acts);
    let error = match probe.process_batch(&mut docs) {
        Err(e) => e.to_string(),
        Ok(outcomes) => outcomes
            .iter()
            .find_map(|o| o.as_ref().err().map(ToString::to_string))
            .expect("the 17th handle is refused"),
    };
    assert!(
        error.contains("more than 16 handles") && !error.contains("store handle limit"),
        "{error}"
    );
}
