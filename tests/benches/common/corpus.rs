//! The synthetic documents of `local_pipeline`, `plugin_cost` and
//! `binary_ab.py`: ~870 bytes of JSON each, one per line.

use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::json;

/// Write `n` documents to `path` as JSON lines.
pub fn generate(path: &Path, n: usize) {
    let mut out = BufWriter::new(std::fs::File::create(path).expect("create input"));
    let filler = "lorem ipsum dolor sit amet ".repeat(26);
    for i in 0..n {
        let doc = json!({
            "id": format!("doc-{i}"),
            "title": format!("  Document number {i} about weirs and rivers  "),
            "author": format!("Author {}", i % 997),
            "year": 1900 + (i % 125),
            "tags": format!("river;weir;water;tag-{}", i % 31),
            "rating": (i % 50) as f64 / 10.0,
            "body": &filler[..700],
        });
        serde_json::to_writer(&mut out, &doc).expect("write");
        out.write_all(b"\n").expect("write");
    }
    out.flush().expect("flush");
}
