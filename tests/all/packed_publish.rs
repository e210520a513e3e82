//! `publish-packed` (contract 0.2.3): many documents a call, made and
//! published in order as one-by-one calls would be, whatever a connector
//! packs into the call: documents that are not documents, a run that
//! refuses, and calls that are not cut up as the contract says.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use weir::core::document::Document;
use weir::plugin::{PluginError, PublishSink};
use weir_tests::{runtime, spec};

/// Keeps what the connector published; refuses every document from
/// `refuse_from` on (the run stopping).
#[derive(Clone, Default)]
struct Collect {
    docs: Arc<Mutex<Vec<Document>>>,
    refuse_from: Option<usize>,
}

impl PublishSink for Collect {
    fn publish(&mut self, doc: Document, _: std::time::Instant) -> Result<(), String> {
        let mut docs = self.docs.lock().expect("lock");
        if self.refuse_from.is_some_and(|from| docs.len() >= from) {
            return Err("the run is stopping".into());
        }
        docs.push(doc);
        Ok(())
    }
}

/// A `publish-packed` call of `docs` (id, JSON text), cut up as the
/// contract says.
fn call(docs: &[(&str, &str)]) -> Value {
    let text: String = docs.iter().flat_map(|(id, json)| [*id, *json]).collect();
    let lengths: Vec<usize> = docs
        .iter()
        .flat_map(|(id, json)| [id.len(), json.len()])
        .collect();
    json!({ "text": text, "lengths": lengths })
}

/// Run the test connector making the `packed` calls `calls`, with
/// `max_document_mib` when set; what it answered, and what was published.
fn run(
    calls: Vec<Value>,
    sink: Collect,
    max_document_mib: Option<u64>,
) -> (Result<(), PluginError>, Vec<Document>) {
    let mut s = spec("test-connector", json!({ "packed": calls }));
    s.limits.max_document_mib = max_document_mib;
    let plugin = runtime().load_connector("packed", &s).expect("load");
    let mut connector = plugin.instantiate().expect("instantiate");
    connector.pre_execute("run-1").expect("pre_execute");
    let result = connector.execute("run-1", Box::new(sink.clone()), Duration::from_secs(60));
    let _ = connector.close();
    let docs = sink.docs.lock().expect("lock").clone();
    (result, docs)
}

fn ids(docs: &[Document]) -> Vec<&str> {
    docs.iter().map(Document::id).collect()
}

#[test]
fn a_packed_call_publishes_each_document_in_order_as_one_by_one_calls_would() {
    let (result, docs) = run(
        vec![
            call(&[
                ("a", r#"{"n":1,"title":"Weir"}"#),
                (
                    "bé",
                    "  {\"n\":2,\"id\":\"not-the-id\",\"nested\":{\"x\":[1,2]}}\n",
                ),
            ]),
            call(&[]),
            call(&[("c", "{}")]),
        ],
        Collect::default(),
        None,
    );
    result.expect("execute");
    assert_eq!(ids(&docs), ["a", "bé", "c"]);
    assert!(docs.iter().all(|d| d.run_id() == Some("run-1")));
    assert_eq!(docs[0].get_string("title").as_deref(), Some("Weir"));
    assert_eq!(
        docs[1].to_json(),
        json!({ "id": "bé", "run_id": "run-1", "n": 2, "nested": { "x": [1, 2] } }),
        "a reserved key in the text is left out, as from-json-with-id leaves it"
    );
}

/// Each way a text can fail to be a document stops the call at it: the
/// documents before it are published, it and those after it are not, and
/// the connector is told which and why.
#[test]
fn a_packed_call_stops_at_the_first_text_that_is_not_a_document() {
    let deep = format!("{{\"x\":{}1{}}}", "[".repeat(200), "]".repeat(200));
    let large = format!("{{\"body\":\"{}\"}}", "x".repeat(2 << 20));
    let cases: [(&str, &str, &str); 5] = [
        ("not JSON", "{\"n\": }", "invalid JSON"),
        ("not an object", "[1,2]", "object"),
        ("two values", "{} {}", "invalid JSON"),
        ("too deep", &deep, "max_depth"),
        ("too large", &large, "max_document_mib"),
    ];
    for (what, bad, says) in cases {
        let (result, docs) = run(
            vec![call(&[("ok-1", "{}"), ("bad", bad), ("ok-2", "{}")])],
            Collect::default(),
            Some(1),
        );
        let err = result.expect_err(what).to_string();
        assert!(
            err.contains("packed call 0 refused document 1") && err.contains(says),
            "{what}: {err}"
        );
        assert_eq!(ids(&docs), ["ok-1"], "{what}");
    }
}

#[test]
fn a_run_that_refuses_a_packed_document_stops_the_call_there() {
    let sink = Collect {
        refuse_from: Some(2),
        ..Collect::default()
    };
    let (result, docs) = run(
        vec![call(&[("a", "{}"), ("b", "{}"), ("c", "{}"), ("d", "{}")])],
        sink,
        None,
    );
    let err = result.expect_err("refused").to_string();
    assert!(
        err.contains("packed call 0 refused document 2: refused: the run is stopping"),
        "{err}"
    );
    assert_eq!(ids(&docs), ["a", "b"]);
}

/// A call not cut up as the contract says is the plugin's error: it stops
/// the call, names what is wrong, and publishes nothing of it; the host
/// goes on (a new instance of the same plugin publishes).
#[test]
fn a_packed_call_cut_up_wrongly_fails_its_plugin_and_publishes_nothing() {
    let too_many = json!({ "text": "", "lengths": vec![0; 2 * 4097] });
    let cases = [
        (
            "an odd number of lengths",
            json!({ "text": "a{}", "lengths": [1, 2, 0] }),
            "3 lengths",
        ),
        (
            "past the text",
            json!({ "text": "a{}", "lengths": [1, 3] }),
            "past the text's 3 bytes",
        ),
        (
            "inside a character",
            json!({ "text": "é{}", "lengths": [1, 3] }),
            "inside a character",
        ),
        (
            "text left over",
            json!({ "text": "a{}b{}", "lengths": [1, 2] }),
            "cover 3 of the text's 6 bytes",
        ),
        (
            "lengths that overflow",
            json!({ "text": "a{}", "lengths": [1, u32::MAX, u32::MAX, u32::MAX] }),
            "past the text",
        ),
        (
            "too many documents",
            too_many,
            "4097 documents in one call; it takes at most 4096",
        ),
    ];
    for (what, bad, says) in cases {
        let (result, docs) = run(vec![bad], Collect::default(), None);
        let err = result.expect_err(what).to_string();
        assert!(
            err.contains("publish-packed") && err.contains(says),
            "{what}: {err}"
        );
        assert!(docs.is_empty(), "{what}: {:?}", ids(&docs));
    }
    // As many as a call takes is taken.
    let most: Vec<(String, &str)> = (0..4096).map(|n| (format!("d{n}"), "{}")).collect();
    let most: Vec<(&str, &str)> = most.iter().map(|(id, j)| (id.as_str(), *j)).collect();
    let (result, docs) = run(vec![call(&most)], Collect::default(), None);
    result.expect("4096 documents in one call");
    assert_eq!(docs.len(), 4096);
    assert_eq!(docs[4095].id(), "d4095");
}
