//! What the Python and JavaScript SDKs promise a plugin author, beyond the
//! conformance suite: one plugin object for the instance's life, ordinary
//! exceptions as per-document errors with their message (the instance is not
//! replaced), a clear error for a lent document used after its call, and
//! logs in the host's log; fields read and written several at a time, a
//! field read again after a change, a batch of documents each with its
//! own outcome, and changes kept for the end of a batch (read back at once,
//! made before any call that would not see them, and a refused one failing
//! only its document). `plugins/testing/sdk-behaviour/` holds the probe.

use serde_json::json;
use weir_tests::{doc, repo_root, runtime, sdk_component};

fn probe(lang: &str) -> weir::plugin::StageInstance {
    probe_within(lang, None)
}

/// The probe, with documents of at most `max_document_mib`.
fn probe_within(lang: &str, max_document_mib: Option<u64>) -> weir::plugin::StageInstance {
    let src = repo_root().join("plugins/testing/sdk-behaviour").join(lang);
    let path = sdk_component(lang, "stage", &src);
    let mut spec = weir::plugin::PluginSpec::new(path, json!({}));
    spec.limits.max_document_mib = max_document_mib;
    runtime()
        .load_stage(&format!("probe-{lang}"), &spec)
        .expect("load")
        .instantiate()
        .expect("instantiate")
}

fn check(lang: &str, exception: &str) {
    let mut stage = probe(lang);
    let mut run = |fields: serde_json::Value| {
        let mut d = doc(fields);
        let outcome = stage.process(&mut d);
        (d, outcome)
    };
    // State on the plugin object lasts from call to call.
    let (first, _) = run(json!({ "id": "1" }));
    let (second, _) = run(json!({ "id": "2" }));
    assert_eq!(first.get("calls"), Some(&json!(1)), "{lang}");
    assert_eq!(second.get("calls"), Some(&json!(2)), "{lang}");

    // An ordinary exception fails the document with its type and message.
    let (_, raised) = run(json!({ "id": "3", "action": "raise" }));
    let error = raised.expect_err("an exception fails the document");
    assert!(
        matches!(&error, weir::plugin::PluginError::Document { message, transient: false, .. }
            if message == &format!("{exception}: bad value in 3")),
        "{lang}: {error}"
    );

    // A lent document kept and used in a later call: a clear error.
    let (_, kept) = run(json!({ "id": "4", "action": "keep" }));
    assert!(kept.is_ok(), "{lang}: {kept:?}");
    let (_, used) = run(json!({ "id": "5", "action": "use-kept" }));
    let message = used.expect_err("a stale document fails").to_string();
    assert!(message.contains("was lent"), "{lang}: {message}");
    // Python names the document (it knows which ones the plugin kept); the
    // JavaScript SDK only when the call read its id (asking costs a call).
    if lang == "python" {
        assert!(message.contains("document `4`"), "{lang}: {message}");
    }

    // Logging works and goes through the host (a plugin call, not a trap).
    let (logged, outcome) = run(json!({ "id": "6", "action": "log" }));
    assert!(outcome.is_ok(), "{lang}: {outcome:?}");
    // The same object served every call: nothing was restarted.
    assert_eq!(logged.get("calls"), Some(&json!(6)), "{lang}");

    // Several fields in one call each, absent ones included.
    let (fields, outcome) =
        run(json!({ "id": "7", "action": "fields", "a": 1, "b": [true, null, "x", 2.5] }));
    assert!(outcome.is_ok(), "{lang}: {outcome:?}");
    assert_eq!(
        fields.get("got"),
        Some(&json!({
            "first": [1, null],
            "every": [[1], [true, null, "x", 2.5], []],
            "texts": [["true", "x", "2.5"], []],
        })),
        "{lang}"
    );
    assert!(!fields.has("a"), "{lang}: update did not remove `a`");

    // A field read, changed, then read again: the new value.
    let (reread, _) = run(json!({ "id": "8", "action": "reread", "a": 1 }));
    assert_eq!(
        reread.fields().get("seen"),
        Some(&json!([1, 2, true, false])),
        "{lang}"
    );

    // Changes of a batch's document are read back at once, and made before
    // a call that asks the host.
    let (buffered, outcome) = run(json!({ "id": "9b", "action": "buffered" }));
    assert!(outcome.is_ok(), "{lang}: {outcome:?}");
    assert_eq!(
        buffered.fields().get("seen"),
        Some(&json!(["new", [1, 2], false])),
        "{lang}"
    );
    assert_eq!(
        buffered.fields().get("names"),
        Some(&json!(["calls", "x", "y", "seen"])),
        "{lang}"
    );
    assert!(!buffered.has("action"), "{lang}");

    // A batch: the per-document API gives each document its own outcome.
    let mut docs = vec![
        doc(json!({ "id": "9" })),
        doc(json!({ "id": "10", "action": "raise" })),
        doc(json!({ "id": "11" })),
    ];
    let outcomes = stage.process_batch(&mut docs).expect("the batch call");
    assert!(stage.is_batch(), "{lang}: the SDK built a document stage");
    assert!(
        outcomes[0].is_ok() && outcomes[1].is_err() && outcomes[2].is_ok(),
        "{lang}: {outcomes:?}"
    );
    assert_eq!(docs[2].get("calls"), Some(&json!(12)), "{lang}");
    assert_eq!(stage.restarts(), 0, "{lang}: the instance was replaced");
}

/// A change the host refuses at the end of the batch (the document would
/// grow past its limit) fails its document only, with the field error.
fn refused_change_fails_only_its_document(lang: &str) {
    let mut stage = probe_within(lang, Some(1));
    let mut docs = vec![
        doc(json!({ "id": "a" })),
        doc(json!({ "id": "g", "action": "grow" })),
        doc(json!({ "id": "c" })),
    ];
    let outcomes = stage.process_batch(&mut docs).expect("the batch call");
    assert!(
        outcomes[0].is_ok() && outcomes[2].is_ok(),
        "{lang}: {outcomes:?}"
    );
    let message = outcomes[1].as_ref().expect_err("too large").to_string();
    assert!(message.contains("`big`"), "{lang}: {message}");
    assert!(message.contains("document `g`"), "{lang}: {message}");
    assert!(!docs[1].has("big") && !docs[1].has("after"), "{lang}");
    assert_eq!(
        docs[1].get("calls"),
        Some(&json!(2)),
        "{lang}: the change before it is made"
    );
    assert_eq!(docs[2].get("calls"), Some(&json!(3)), "{lang}");
    assert_eq!(stage.restarts(), 0, "{lang}: the instance was replaced");
}

#[test]
fn a_refused_change_fails_only_its_document_in_python() {
    refused_change_fails_only_its_document("python");
}

#[test]
fn a_refused_change_fails_only_its_document_in_js() {
    refused_change_fails_only_its_document("js");
}

#[test]
fn the_python_sdk_keeps_state_and_turns_exceptions_into_document_errors() {
    check("python", "ValueError");
}

#[test]
fn the_js_sdk_keeps_state_and_turns_exceptions_into_document_errors() {
    check("js", "RangeError");
}
