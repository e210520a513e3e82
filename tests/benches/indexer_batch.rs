//! What handing documents to an indexer costs, the 0.1 way against the 0.2
//! way, in one run (a batch of 500 documents of about 1 KB):
//!
//! - `pull per document` (contract 0.1): one guest call per document, in
//!   which the guest pulls the document's JSON through its handle into its
//!   memory (`noop-stage` with `pull_json`, the same path `add-document`
//!   took);
//! - `batch, JSON` (0.2): one `index-batch` call; the host renders each
//!   document's JSON and the batch is copied into the guest once
//!   (`nop-indexer` with `json = true`);
//! - `batch, nothing`: the same call asking for no JSON (the call's floor);
//! - `render natively`: the host rendering the JSON alone (the baseline).
//!
//! Run with `cargo bench -p weir-tests --bench indexer_batch`.

#[path = "common/measure.rs"]
mod measure;

use serde_json::json;
use weir::core::document::Document;
use weir_tests::{runtime, spec};

const BATCH: usize = 500;
const ROUNDS: usize = 40;

fn batch() -> Vec<Document> {
    (0..BATCH)
        .map(|i| weir_tests::sample_document(&format!("doc-{i}")))
        .collect()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mut docs = batch();
    let mut rows = Vec::new();

    let stage = runtime()
        .load_stage("pull", &spec("noop-stage", json!({ "pull_json": true })))
        .expect("load");
    let mut stage = stage.instantiate().expect("instantiate");
    rows.push((
        "pull per document (0.1)",
        measure::per_item(ROUNDS, BATCH, || {
            for d in docs.iter_mut() {
                stage.process(d).expect("process");
            }
        }),
    ));

    for (name, json) in [("batch, JSON (0.2)", true), ("batch, nothing", false)] {
        let indexer = runtime()
            .load_indexer("nop", &spec("nop-indexer", json!({ "json": json })))
            .expect("load");
        let mut indexer = indexer.instantiate().expect("instantiate");
        rows.push((
            name,
            measure::per_item(ROUNDS, BATCH, || {
                indexer.send_batch(&docs).expect("plugin").expect("batch");
            }),
        ));
    }

    rows.push((
        "render natively",
        measure::per_item(ROUNDS, BATCH, || {
            for d in &docs {
                std::hint::black_box(d.to_json_string());
            }
        }),
    ));

    let (_, (_, native_cpu)) = rows[rows.len() - 1];
    println!("indexer hand-over, per document (median of {ROUNDS} batches of {BATCH}):");
    println!(
        "  {:<26} {:>10} {:>10} {:>14}",
        "", "wall ns", "CPU ns", "CPU / native"
    );
    for (name, (wall, cpu)) in &rows {
        println!(
            "  {name:<26} {wall:>10.0} {cpu:>10.0} {:>13.1}x",
            cpu / native_cpu
        );
    }
    let (pull, batch) = (rows[0].1.1, rows[1].1.1);
    println!("  0.2 batch / 0.1 pull (CPU)  {:.2}", batch / pull);
}
