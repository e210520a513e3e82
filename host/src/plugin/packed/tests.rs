//! Tests of packed batches: entries packed in the order and shape of `index-batch`.

use std::collections::HashSet;

use serde_json::json;

use super::{ABSENT, Packed};
use crate::core::document::Document;
use crate::plugin::indexer_batch::{BatchFormat, with_entries};

fn doc(json: serde_json::Value) -> Document {
    Document::from_json(json).expect("doc")
}

fn format(json: bool, pick: &[&str]) -> BatchFormat {
    BatchFormat {
        json,
        fields: None,
        omit: HashSet::new(),
        pick: pick.iter().map(|p| (*p).to_owned()).collect(),
    }
}

#[test]
fn entries_are_packed_in_the_order_and_shape_of_index_batch() {
    let mut with_run = doc(json!({ "id": "b", "t": "x" }));
    with_run.set_run_id(Some("run-1".into()));
    let docs = vec![
        // From text: numbers keep their spelling.
        Document::from_json_str(r#"{"id":"a","t":["é, ü",null,2.50,true,{"k":[1]}],"n":1e3}"#)
            .expect("doc"),
        with_run,
        doc(json!({ "id": "c" })),
    ];
    let format = format(true, &["t", "n", "absent"]);
    let packed = Packed::of(&docs, &format).expect("packed");
    // What `index-batch` would hand over for the same batch, read back out
    // of the packed layout piece by piece.
    let text = std::str::from_utf8(&packed.text).expect("utf-8");
    let mut lengths = packed.lengths.iter().copied();
    let mut at = 0usize;
    let mut piece = |length: u32| {
        let piece = &text[at..at + length as usize];
        at += length as usize;
        piece.to_owned()
    };
    let mut read = Vec::new();
    for _ in 0..packed.count {
        let id = piece(lengths.next().expect("id"));
        let mut optional = |length: u32| (length != ABSENT).then(|| piece(length));
        let run_id = optional(lengths.next().expect("run id"));
        let json = optional(lengths.next().expect("json"));
        let picked: Vec<Vec<String>> = (0..format.pick.len())
            .map(|_| {
                let count = lengths.next().expect("count");
                (0..count)
                    .map(|_| piece(lengths.next().expect("value")))
                    .collect()
            })
            .collect();
        read.push((id, run_id, json, picked));
    }
    assert_eq!(lengths.next(), None, "every length read");
    assert_eq!(at, text.len(), "all the text read");
    let expected = with_entries(&docs, &format, |entries| {
        entries
            .iter()
            .map(|e| {
                (
                    e.id.to_owned(),
                    e.run_id.map(str::to_owned),
                    e.json.map(str::to_owned),
                    e.picked
                        .iter()
                        .map(|f| f.iter().map(|v| (*v).to_owned()).collect())
                        .collect::<Vec<Vec<String>>>(),
                )
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(read, expected);
    // Spot checks of what both say: nulls skipped, numbers as written,
    // JSON as JSON text, no JSON where none was asked.
    assert_eq!(read[0].3[0], ["é, ü", "2.50", "true", r#"{"k":[1]}"#]);
    assert_eq!(read[0].3[1], ["1e3"]);
    assert_eq!(read[1].1.as_deref(), Some("run-1"));
    assert!(read[2].3.iter().all(Vec::is_empty));
}

#[test]
fn without_json_or_picks_an_entry_is_its_id_and_two_absent_pieces() {
    let docs = vec![doc(json!({ "id": "only", "t": "x" }))];
    let packed = Packed::of(&docs, &format(false, &[])).expect("packed");
    assert_eq!(packed.text, b"only");
    assert_eq!(packed.lengths, [4, ABSENT, ABSENT]);
    let empty = Packed::of(&[], &format(true, &["t"])).expect("packed");
    assert_eq!(
        (empty.count, empty.text.len(), empty.lengths.len()),
        (0, 0, 0)
    );
}
