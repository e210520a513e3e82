//! The bundled stages that read fields and write what they find: plain
//! text and Markdown, entities, number lists, marks, fingerprints and
//! timestamps, each run as a batch through the runtime.

use serde_json::json;
use weir_tests::spec;

use crate::extraction::granted;
use crate::text_stages::{batch, batch_with, issues, one};

#[test]
fn extract_text_reads_plain_text_and_markdown_in_their_character_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("notes.md"),
        "# Weirs\r\n\r\nA *weir* [holds](http://x) water.\r\n",
    )
    .expect("write");
    // Latin-1 bytes, not UTF-8: read in the guessed character set.
    std::fs::write(dir.path().join("old.txt"), b"caf\xe9 cr\xe8me\r\nline two").expect("write");
    std::fs::write(dir.path().join("big.txt"), vec![b'a'; (1 << 20) + 1]).expect("write");
    let s = granted(
        spec(
            "extract-text",
            json!({ "from": "file", "source": "path", "max_mib": 1, "charset_field": "charset" }),
        ),
        dir.path(),
    );
    let out = batch_with(
        s,
        vec![
            json!({ "id": "md", "path": "/pages/notes.md" }),
            json!({ "id": "txt", "path": "/pages/old.txt" }),
            json!({ "id": "big", "path": "/pages/big.txt" }),
            json!({ "id": "gone", "path": "/pages/nope.txt" }),
        ],
    );
    let md = &out[0].as_ref().expect("markdown").0;
    assert_eq!(
        (md["text"].clone(), md["title"].clone()),
        (json!("Weirs\n\nA weir holds water."), json!("Weirs"))
    );
    let txt = &out[1].as_ref().expect("text").0;
    assert_eq!(txt["text"], json!("café crème\nline two"));
    assert_ne!(txt["charset"], json!("UTF-8"));
    assert!(
        out[2]
            .as_ref()
            .expect_err("too big")
            .contains("larger than the limit of 1 MiB"),
        "{out:?}"
    );
    assert!(out[3].is_err(), "{out:?}");
    // From a field, Markdown only when asked.
    let f = one(
        "extract-text",
        json!({ "source": "body", "format": "markdown" }),
        json!({ "id": "1", "body": "## Title\n\n- a\n- b" }),
    );
    assert_eq!(f["text"], json!("Title\n\na\n\nb"));
}

#[test]
fn extract_entities_finds_whole_terms_once_each_in_one_pass() {
    let config = json!({
        "sources": ["title", "body"],
        "target": "places",
        "terms": { "new york": "New York City", "nyc": "New York City", "york": "York", "paris": "Paris" }
    });
    let out = batch(
        "extract-entities",
        config,
        vec![
            json!({ "id": "1", "title": "From NYC to Paris", "body": ["New York in spring", "old york"] }),
            json!({ "id": "2", "body": "Yorkshire and parisian cafés" }),
        ],
    );
    let first = &out[0].as_ref().expect("first").0;
    assert_eq!(first["places"], json!(["New York City", "Paris", "York"]));
    let second = &out[1].as_ref().expect("second").0;
    assert_eq!(second.get("places"), None, "no whole word: {second}");
    let errors = issues(
        "extract-entities",
        json!({ "sources": ["b"], "target": "t", "terms": { " ": "x" } }),
    );
    assert!(
        errors.iter().any(|e| e.contains("empty term")),
        "{errors:?}"
    );
}

#[test]
fn parse_floats_contains_value_fingerprint_and_timestamp() {
    let out = batch(
        "parse-floats",
        json!({ "mappings": [{ "source": "v", "target": "vector" }] }),
        vec![
            json!({ "id": "json", "v": "[1.5, 2, -3e-2]" }),
            json!({ "id": "csv", "v": " 1.5, 2 ,-0.03" }),
            json!({ "id": "bad", "v": "1.5,two" }),
            json!({ "id": "nan", "v": "NaN" }),
        ],
    );
    let vector = |i: usize| out[i].as_ref().expect("parsed").0["vector"].clone();
    assert_eq!(vector(0), json!([1.5, 2.0, -0.03]));
    assert_eq!(vector(1), json!([1.5, 2.0, -0.03]));
    assert!(
        out[2]
            .as_ref()
            .expect_err("bad")
            .contains("`two` is not a finite number")
    );
    assert!(out[3].is_err(), "{out:?}");

    let marks = batch(
        "contains-value",
        json!({ "fields": ["t"], "values": ["Urgent"], "target": "p", "value": "high", "otherwise": "low", "ignore_case": true }),
        vec![
            json!({ "id": "1", "t": ["fine", "this is URGENT!"] }),
            json!({ "id": "2", "t": "nonurgent" }),
        ],
    );
    let mark = |i: usize| marks[i].as_ref().expect("marked").0["p"].clone();
    assert_eq!((mark(0), mark(1)), (json!("high"), json!("low")));

    let prints = batch(
        "fingerprint",
        json!({ "fields": ["a", "b"] }),
        vec![
            json!({ "id": "1", "a": "xy", "b": "z" }),
            json!({ "id": "2", "a": "x", "b": "yz" }),
            json!({ "id": "3", "a": "xy", "b": "z", "c": "ignored" }),
            json!({ "id": "4", "a": { "k": 1, "j": 2 } }),
            json!({ "id": "5", "a": { "j": 2, "k": 1 }, "b": null }),
            json!({ "id": "6", "a": { "j": 2, "k": 1 } }),
        ],
    );
    let print = |i: usize| prints[i].as_ref().expect("hashed").0["fingerprint"].clone();
    assert_eq!(print(0), print(2));
    assert_ne!(print(0), print(1), "text shifted between fields");
    assert_ne!(print(3), print(4), "absent is not null");
    assert_eq!(print(3), print(5), "keys in any order");
    assert_eq!(print(0).as_str().map(str::len), Some(64));

    let stamped = batch(
        "timestamp",
        json!({ "field": "at", "overwrite": false }),
        vec![json!({ "id": "1" }), json!({ "id": "2", "at": "kept" })],
    );
    let at = |i: usize| stamped[i].as_ref().expect("stamped").0["at"].clone();
    let now = at(0);
    let now = now.as_str().unwrap_or_default();
    assert!(
        now.len() == 24 && now.ends_with('Z') && now.starts_with("20"),
        "{now}"
    );
    assert_eq!(at(1), json!("kept"));
}
