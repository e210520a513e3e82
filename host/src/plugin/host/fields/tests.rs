//! The batch-wide calls through the very host functions a guest calls:
//! their answers against the one-document calls', their bounds, and the
//! journal that puts a trapped batch back.

use serde_json::json;
use wasmtime::component::Resource;

use super::{MAX_EACH, MAX_PER_CALL};
use crate::core::document::Document;
use crate::plugin::bindings::batch_stage::weir::plugin::fields::{Change, FieldChange, Host};
use crate::plugin::bindings::{FieldError, Value};
use crate::plugin::host::PluginState;
use crate::plugin::host::fuzz::plugin_state;

/// A state lending `docs` as a batch (journaled, as for a batch of more
/// than one), with their handles.
fn lending(docs: Vec<serde_json::Value>) -> (PluginState, Vec<u32>) {
    let mut state = plugin_state();
    let mut reps = Vec::new();
    for fields in docs {
        let mut doc = Document::from_json(fields).expect("a document");
        doc.set_limits(state.budget.doc_limits);
        reps.push(state.docs.push(doc).expect("lend").rep());
    }
    state.journal.start(reps.iter().copied(), true, true);
    (state, reps)
}

fn borrow(rep: u32) -> Resource<Document> {
    Resource::new_borrow(rep)
}

fn names(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn set(name: &str, json: &str) -> FieldChange {
    FieldChange {
        name: name.into(),
        change: Change::SetJson(json.into()),
    }
}

fn doc(state: &PluginState, rep: u32) -> &Document {
    state.docs.get(&borrow(rep)).expect("a document")
}

/// The message of the limit that stopped the call.
fn refusal(state: &PluginState, trap: wasmtime::Error) -> String {
    let hit = state.budget.hit.as_ref().expect("a limit stopped the call");
    assert_eq!(hit.message, trap.to_string());
    hit.message.clone()
}

#[test]
fn each_document_answers_what_get_json_many_answers() {
    let (mut state, reps) = lending(vec![
        json!({ "id": "a", "title": "A", "tags": ["x", "y"] }),
        json!({ "id": "b", "n": 1.50 }),
    ]);
    let asked = names(&["title", "tags", "n"]);
    let each = state
        .get_json_each(reps.iter().map(|&r| borrow(r)).collect(), asked.clone())
        .expect("answered");
    let many: Vec<_> = reps
        .iter()
        .map(|&r| state.get_json_many(borrow(r), asked.clone()).expect("many"))
        .collect();
    assert_eq!(each, many);
    assert_eq!(
        each[0],
        vec![Some("\"A\"".into()), Some("[\"x\",\"y\"]".into()), None]
    );
    assert_eq!(each[1], vec![None, None, Some("1.5".into())]);
}

#[test]
fn a_failing_change_fails_only_its_own_document() {
    let (mut state, reps) = lending(vec![
        json!({ "id": "a" }),
        json!({ "id": "b" }),
        json!({ "id": "c" }),
    ]);
    let too_many: Vec<FieldChange> = (0..=MAX_PER_CALL)
        .map(|i| set(&format!("f{i}"), "1"))
        .collect();
    let results = state
        .update_each(vec![
            (borrow(reps[0]), vec![set("x", "1"), set("y", "[2,3]")]),
            (
                borrow(reps[1]),
                vec![set("x", "1"), set("id", "\"no\""), set("z", "3")],
            ),
            (borrow(reps[2]), too_many),
        ])
        .expect("answered");
    assert!(results[0].is_ok(), "{results:?}");
    assert!(
        matches!(&results[1], Err(FieldError::ReservedField(m)) if m == "id"),
        "{results:?}"
    );
    assert!(matches!(&results[2], Err(FieldError::TooLarge(m)) if m.contains("4097 changes")));
    assert_eq!(doc(&state, reps[0]).fields().get("y"), Some(&json!([2, 3])));
    // The changes before the failing one are made, those after it are not.
    assert_eq!(doc(&state, reps[1]).fields().get("x"), Some(&json!(1)));
    assert!(!doc(&state, reps[1]).has("z"));
    assert_eq!(doc(&state, reps[2]).field_names().count(), 0);
}

#[test]
fn changes_of_a_batch_are_journaled_as_one_by_one() {
    let before = [
        json!({ "id": "a", "x": 1, "gone": true }),
        json!({ "id": "b", "x": 2 }),
    ];
    let (mut state, reps) = lending(before.to_vec());
    let results = state
        .update_each(vec![
            (
                borrow(reps[0]),
                vec![
                    set("x", "10"),
                    FieldChange {
                        name: "gone".into(),
                        change: Change::Remove,
                    },
                ],
            ),
            (
                borrow(reps[1]),
                vec![
                    set("new", "\"n\""),
                    FieldChange {
                        name: "x".into(),
                        change: Change::Add(Value::Integer(3)),
                    },
                ],
            ),
        ])
        .expect("answered");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let kept = state.journal.finish();
    for ((rep, kept), was) in reps.iter().zip(kept).zip(&before) {
        let mut doc = state
            .docs
            .delete(Resource::<Document>::new_own(*rep))
            .expect("back");
        assert_ne!(&doc.to_json(), was);
        kept.expect("journaled").restore(&mut doc);
        assert_eq!(&doc.to_json(), was);
    }
}

#[test]
fn asking_for_too_many_documents_names_or_answers_stops_the_call() {
    let (mut state, reps) = lending(vec![json!({ "id": "a", "t": "x" })]);
    let listed = |n: usize| (0..n).map(|_| borrow(reps[0])).collect::<Vec<_>>();
    let cases = [
        (
            MAX_PER_CALL + 1,
            1,
            "4097 documents in one call, more than the 4096",
        ),
        (
            1,
            MAX_PER_CALL + 1,
            "4097 field names in one call, more than the 4096",
        ),
        (
            MAX_PER_CALL,
            17,
            "69632 answers (documents times names) in one call, more than the 65536",
        ),
    ];
    for (docs, count, expected) in cases {
        let trap = state
            .get_json_each(listed(docs), vec!["t".to_owned(); count])
            .expect_err("refused");
        let message = refusal(&state, trap);
        assert!(message.contains(expected), "{message}");
        state.budget.start_call();
    }
    // As many as one call takes: all the names of one document, or one
    // absent field (which counts nothing) of the most documents.
    state
        .get_json_each(listed(1), vec!["t".to_owned(); MAX_PER_CALL])
        .expect("every name of one document");
    let absent = vec!["none".to_owned(); MAX_EACH / MAX_PER_CALL];
    let answer = state
        .get_json_each(listed(MAX_PER_CALL), absent)
        .expect("the most answers");
    assert_eq!(answer.len() * answer[0].len(), MAX_EACH);

    let updates = |n: usize, per: usize| {
        (0..n)
            .map(|_| (borrow(reps[0]), vec![set("t", "1"); per]))
            .collect::<Vec<_>>()
    };
    let trap = state
        .update_each(updates(MAX_PER_CALL + 1, 0))
        .expect_err("refused");
    assert!(refusal(&state, trap).contains("4097 documents in one call"));
    state.budget.start_call();
    let trap = state
        .update_each(updates(17, MAX_PER_CALL))
        .expect_err("refused");
    assert!(refusal(&state, trap).contains("69632 changes in one call, more than the 65536"));
}

#[test]
fn an_answer_holds_at_most_what_the_documents_read_hold() {
    // Two documents of 600 KB under a 1 MiB document limit: reading both
    // once answers 1.2 MB, more than a document, as much as they hold.
    let big = "x".repeat(600 << 10);
    let (mut state, reps) = lending(vec![
        json!({ "id": "a", "big": big }),
        json!({ "id": "b", "big": big }),
    ]);
    let both = state
        .get_json_each(vec![borrow(reps[0]), borrow(reps[1])], names(&["big"]))
        .expect("what the batch holds");
    assert_eq!(both.len(), 2);
    // The same document twice, or the same field twice, holds no more.
    for (docs, asked) in [
        (vec![borrow(reps[0]), borrow(reps[0])], names(&["big"])),
        (vec![borrow(reps[0])], names(&["big", "big"])),
    ] {
        state.budget.start_call();
        let trap = state.get_json_each(docs, asked).expect_err("refused");
        let message = refusal(&state, trap);
        assert!(
            message.contains("more than the documents read hold"),
            "{message}"
        );
    }
}

#[test]
fn a_handle_that_is_not_the_plugins_stops_the_call() {
    let (mut state, reps) = lending(vec![json!({ "id": "a" })]);
    let gone = state
        .docs
        .delete(Resource::<Document>::new_own(reps[0]))
        .expect("taken back");
    assert_eq!(gone.id(), "a");
    assert!(
        state
            .get_json_each(vec![borrow(reps[0])], names(&["x"]))
            .is_err()
    );
    assert!(
        state
            .update_each(vec![(borrow(reps[0]), vec![set("x", "1")])])
            .is_err()
    );
}

#[test]
fn the_text_calls_do_what_the_list_calls_do() {
    let (mut state, reps) = lending(vec![
        json!({ "id": "a", "t": "x \"quoted\"", "n": [1, 2] }),
        json!({ "id": "b", "gone": 1 }),
        json!({ "id": "c" }),
    ]);
    let handles = || reps.iter().map(|&r| borrow(r)).collect::<Vec<_>>();
    let asked = names(&["t", "n", "none"]);
    let text = state
        .get_json_each_text(handles(), asked.clone())
        .expect("answered");
    let listed = state.get_json_each(handles(), asked).expect("answered");
    assert_eq!(text, serde_json::to_string(&listed).expect("JSON"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON")[0],
        json!(["\"x \\\"quoted\\\"\"", "[1,2]", null])
    );

    let changes =
        r#"[[["t", "\"y\""]], [["gone", null], ["new", "[3]"]], [["id", "1"], ["z", "1"]]]"#;
    let results = state
        .update_each_text(handles(), changes.to_owned())
        .expect("answered");
    assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
    assert!(
        matches!(&results[2], Err(FieldError::ReservedField(_))),
        "{results:?}"
    );
    assert_eq!(doc(&state, reps[0]).fields().get("t"), Some(&json!("y")));
    assert!(!doc(&state, reps[1]).has("gone"));
    assert_eq!(doc(&state, reps[1]).fields().get("new"), Some(&json!([3])));
    assert!(!doc(&state, reps[2]).has("z"));

    for (bad, expected) in [
        (
            "[[]]",
            "the changes are for 1 documents, not the 3 the call lists",
        ),
        ("{}", "the changes are not JSON of"),
        (r#"[[["t", 1]], [], []]"#, "the changes are not JSON of"),
    ] {
        state.budget.start_call();
        let trap = state
            .update_each_text(handles(), bad.to_owned())
            .expect_err("refused");
        let message = refusal(&state, trap);
        assert!(message.contains(expected), "{bad}: {message}");
    }
}
