//! Unit tests of the document, one file a concern, with the helpers they
//! share.

use super::*;

use serde_json::json;

mod fields;
mod json;
mod limits;
mod paths;

fn doc() -> Document {
    Document::from_json(json!({"id": "d1", "run_id": "r", "title": "Hi", "tags": ["a", "b"]}))
        .expect("valid document")
}

fn small(max_bytes: usize, max_depth: usize) -> Document {
    let mut d = Document::new("d");
    d.set_limits(DocLimits {
        max_bytes,
        max_depth,
    });
    d
}

/// The cached size is what measuring from scratch gives.
fn assert_measured(d: &Document) {
    assert_eq!(d.approx_json_bytes(), d.measure_bytes(), "{d:?}");
}
