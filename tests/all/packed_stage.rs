//! A lent batch's fields read and changed packed (`lending-packed`,
//! contract 0.2.4): what `get-packed` hands over, each change
//! `update-packed` makes or refuses, calls cut up wrongly, the bounds; and
//! the Rust SDK's `FieldStage` over it, each kind of change it can say.
//!
//! `packed-probe` (plugins/testing) makes raw calls against the bare WIT,
//! so each shape can be produced on purpose; `field-probe` is a
//! `FieldStage`. The bundled trim, copy and split stages are field stages
//! too: `stages`, `batch` and the transcripts cover them.

use serde_json::{Value, json};

use super::batch::{field, message};
use weir::core::document::Document;
use weir_tests::{doc, runtime, spec};

fn instance(name: &str, config: Value) -> weir::plugin::StageInstance {
    let plugin = runtime()
        .load_stage(name, &spec(name, config))
        .expect("load");
    plugin.instantiate().expect("instantiate")
}

/// Documents `d0`, `d1`, ... with `act` and `n` as given (`n` absent when
/// null).
fn batch(docs: &[(&str, Value)]) -> Vec<Document> {
    docs.iter()
        .enumerate()
        .map(|(i, (act, n))| {
            let mut fields = json!({ "id": format!("d{i}"), "act": act, "tags": ["t"] });
            if !n.is_null() {
                fields["n"] = n.clone();
            }
            doc(fields)
        })
        .collect()
}

#[test]
fn a_packed_batch_hands_over_each_fields_json_text_and_makes_each_change() {
    let mut probe = instance("packed-probe", json!({}));
    let big = serde_json::from_str::<Value>("12345678901234567890123").expect("number");
    let mut docs = batch(&[
        ("ok", json!(7)),
        ("ok", Value::Null),
        ("remove", json!([1, "a", { "k": "é\"" }])),
        ("refused", json!(1.5)),
        ("bad-json", big.clone()),
        ("deep", json!("tab\there")),
        ("escaped", json!({ "b": 1, "a": 2 })),
    ]);
    let outcomes = probe.process_batch(&mut docs).expect("the call succeeds");
    // Each field's JSON text as `get-json` gives it, cut apart exactly.
    let pieces: Vec<Value> = docs.iter().map(|d| field(d, "pieces")).collect();
    assert_eq!(
        pieces,
        [
            json!(["\"ok\"", "7"]),
            json!(["\"ok\"", null]),
            json!(["\"remove\"", r#"[1,"a",{"k":"é\""}]"#]),
            json!(["\"refused\"", "1.5"]),
            json!(["\"bad-json\"", "12345678901234567890123"]),
            json!(["\"deep\"", r#""tab\there""#]),
            json!(["\"escaped\"", r#"{"b":1,"a":2}"#]),
        ]
    );
    assert!(outcomes[0].is_ok() && outcomes[1].is_ok() && outcomes[6].is_ok());
    assert_eq!(field(&docs[0], "n"), json!(7), "untouched");
    // A removal.
    assert!(outcomes[2].is_ok());
    assert_eq!(field(&docs[2], "n"), Value::Null);
    // A refused change stops its document's later changes, not the
    // earlier ones, and is answered by position naming the field.
    let refused = message(&outcomes[3]);
    assert!(refused.contains("ReservedField"), "{refused}");
    assert_eq!(docs[3].id(), "d3");
    assert_eq!(field(&docs[3], "first"), json!(1));
    assert_eq!(field(&docs[3], "after"), Value::Null);
    // Text that is not JSON, and JSON deeper than a document may hold.
    let bad = message(&outcomes[4]);
    assert!(bad.contains("InvalidJson") && bad.contains("`x`"), "{bad}");
    assert_eq!(field(&docs[4], "n"), big, "a number kept as written");
    let deep = message(&outcomes[5]);
    assert!(deep.contains("`x`") && deep.contains("deep"), "{deep}");
    assert_eq!(field(&docs[5], "x"), Value::Null);
    // Escapes and non-ASCII arrive as the text they stand for.
    assert_eq!(field(&docs[6], "x"), json!("é\n\"q\"A"));
}

#[test]
fn a_packed_call_cut_wrongly_changes_nothing_and_fails_only_its_document() {
    for (act, says) in [
        ("odd", "2 numbers: three are needed for each change"),
        (
            "past-batch",
            "change 0 is for the document at 1, past the batch's 1",
        ),
        ("past-text", "past the text's 2 bytes"),
        ("inside", "inside a character"),
        ("short", "cover 2 of the text's 3 bytes"),
    ] {
        let mut probe = instance("packed-probe", json!({}));
        let mut docs = batch(&[("ok", json!(1)), (act, json!(2)), ("ok", json!(3))]);
        let error = probe
            .process_batch(&mut docs)
            .expect_err("a call cut wrongly stops the call");
        assert!(
            error.to_string().contains("update-packed"),
            "{act}: {error}"
        );
        // Nothing of the batch changed: each runs again by itself.
        assert!(docs.iter().all(|d| field(d, "pieces").is_null()), "{act}");
        let alone: Vec<_> = docs.iter_mut().map(|d| probe.process(d)).collect();
        assert!(alone[0].is_ok() && alone[2].is_ok(), "{act}: {alone:?}");
        let poison = message(&alone[1]);
        assert!(poison.contains(says), "{act}: {poison}");
        assert!(field(&docs[1], "pieces").is_null(), "{act}");
        assert_eq!(field(&docs[2], "pieces"), json!(["\"ok\"", "3"]));
    }
}

#[test]
fn a_packed_read_asking_for_more_than_a_call_takes_is_refused_by_name() {
    let mut probe = instance("packed-probe", json!({ "names": 4097 }));
    let mut docs = batch(&[("ok", json!(1))]);
    let outcomes = probe.process_batch(&mut docs).expect("a batch of one");
    let refused = message(&outcomes[0]);
    assert!(
        refused.contains("4097 field names in one call"),
        "{refused}"
    );

    // Documents times names past 65,536: 4,096 documents, 17 names.
    let mut probe = instance("packed-probe", json!({ "names": 17 }));
    let mut docs = batch(&vec![("ok", Value::Null); 4096]);
    let error = probe.process_batch(&mut docs).expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("69632 answers (documents times names)"),
        "{error}"
    );
    let mut docs = batch(&vec![("ok", Value::Null); 4096]);
    let mut probe = instance("packed-probe", json!({ "names": 16 }));
    let outcomes = probe.process_batch(&mut docs).expect("16 names fit");
    assert!(outcomes.iter().all(Result::is_ok), "{:?}", outcomes[0]);
}

#[test]
fn a_field_stage_says_every_kind_of_change_packed_or_through_the_handle() {
    let mut probe = instance("field-probe", json!({}));
    let acts = ["ok", "add", "error", "refused", "handle", "texts", "remove"];
    let mut docs = batch(&acts.map(|act| (act, Value::Null)));
    let outcomes = probe.process_batch(&mut docs).expect("the call succeeds");
    for (at, d) in docs.iter().enumerate() {
        assert_eq!(field(d, "seen"), json!("yes"), "{}", acts[at]);
    }
    assert!(outcomes[0].is_ok());
    // An `add` sends the document's changes through its handle, in order.
    assert!(outcomes[1].is_ok(), "{:?}", outcomes[1]);
    assert_eq!(field(&docs[1], "tags"), json!(["t", 1]));
    assert_eq!(field(&docs[1], "after"), json!(2));
    // A failed plan keeps the changes it said.
    assert!(message(&outcomes[2]).contains("failed on purpose"));
    assert_eq!(field(&docs[2], "partial"), json!(1));
    // A change the host refuses fails the document, naming the field.
    let refused = message(&outcomes[3]);
    assert!(refused.contains("reserved field"), "{refused}");
    assert_eq!(docs[3].id(), "d3");
    assert_eq!(field(&docs[3], "after"), Value::Null);
    // What the plan writes through the handle, and its changes.
    assert!(outcomes[4].is_ok());
    assert_eq!(field(&docs[4], "direct"), json!("through the handle"));
    assert_eq!(field(&docs[4], "after"), json!(2));
    assert_eq!(field(&docs[5], "many"), json!(["a", "b\"c"]));
    assert_eq!(field(&docs[6], "act"), Value::Null);
    // Untouched documents keep their fields.
    assert_eq!(field(&docs[0], "act"), json!("ok"));
    assert_eq!(field(&docs[0], "tags"), json!(["t"]));
}

/// More changes than one `update-packed` takes go in several calls; a
/// document refused in one has none of its later changes made in the next.
#[test]
fn a_field_stage_s_changes_past_one_call_go_in_several_and_a_refusal_still_stops_its_document() {
    let mut probe = instance("field-probe", json!({}));
    let mut acts = vec!["many"; 3855];
    acts.extend(["straddle", "ok"]);
    let mut docs = batch(
        &acts
            .iter()
            .map(|act| (*act, Value::Null))
            .collect::<Vec<_>>(),
    );
    let outcomes = probe.process_batch(&mut docs).expect("the call succeeds");
    assert!(outcomes[..3855].iter().all(Result::is_ok));
    assert_eq!(field(&docs[0], "f15"), json!(15));
    assert_eq!(field(&docs[3854], "f0"), json!(0));
    let refused = message(&outcomes[3855]);
    assert!(refused.contains("reserved field"), "{refused}");
    assert_eq!(
        field(&docs[3855], "after"),
        Value::Null,
        "not made in the next call"
    );
    assert!(outcomes[3856].is_ok());
    assert_eq!(
        field(&docs[3856], "seen"),
        json!("yes"),
        "the next call is made"
    );
}
