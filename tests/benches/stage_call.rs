//! What a stage call costs, per document, in one run, contract 0.2.0 beside
//! 0.2.1:
//!
//! - `noop` and `copy` 0.2.0: the 0.2.0 builds of noop-stage and copy-fields
//!   (kept in `tests/fixtures/contract-0.2.0`), one `process-document` call
//!   per document (the call, the document handle in and out; copy-fields
//!   copying one field through the document resource);
//! - `noop` and `copy` 0.2.1: the bundled builds, batch stages, called with
//!   batches of [`BATCH`] documents (`process-batch`);
//! - `copy_native`: the same copy done natively on the host's `Document`.
//!
//! Run with `cargo bench -p weir-tests --bench stage_call`. The summary at the
//! end prints ns per document and the ratios against the native baseline.

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};
use weir::core::document::Document;
use weir::plugin::{PluginSpec, StageInstance};
use weir_tests::{repo_root, runtime, spec};

/// Documents per `process-batch` call.
const BATCH: usize = 64;

fn sample() -> Document {
    weir_tests::sample_document("bench-1")
}

fn copy_config() -> Value {
    json!({ "mappings": [{ "source": "title", "target": "title_copy" }] })
}

fn fixture(name: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/contract-0.2.0")
        .join(format!("{name}.wasm"))
}

fn instance(name: &str, spec: &PluginSpec) -> StageInstance {
    runtime()
        .load_stage(name, spec)
        .expect("load")
        .instantiate()
        .expect("instantiate")
}

fn stage_calls(c: &mut Criterion) {
    let mut group = c.benchmark_group("stage_call");
    group.measurement_time(Duration::from_secs(4));

    let per_document = [
        (
            "noop_0.2.0",
            PluginSpec::new(fixture("noop_stage"), json!({})),
        ),
        (
            "copy_0.2.0",
            PluginSpec::new(fixture("copy_fields"), copy_config()),
        ),
    ];
    for (name, spec) in per_document {
        let mut stage = instance(name, &spec);
        let mut d = sample();
        group.bench_function(name, |b| b.iter(|| stage.process(&mut d).expect("process")));
    }

    let batched = [
        ("noop_0.2.1", spec("noop-stage", json!({}))),
        ("copy_0.2.1", spec("copy-fields", copy_config())),
    ];
    for (name, spec) in batched {
        let mut stage = instance(name, &spec);
        if !stage.is_batch() {
            println!("{name}: the bundled build is not a batch stage; called per document");
        }
        let mut docs: Vec<Document> = (0..BATCH).map(|_| sample()).collect();
        group.bench_function(name, |b| {
            b.iter(|| {
                let outcomes = stage.process_batch(&mut docs).expect("process");
                assert!(outcomes.iter().all(Result::is_ok));
            })
        });
    }

    let mut d = sample();
    group.bench_function("copy_native", |b| {
        b.iter(|| {
            let value = d.get("title").cloned().expect("title");
            d.set("title_copy", value).expect("set");
        })
    });
    group.finish();
}

/// Read criterion's point estimate (ns) for one benchmark of this run.
fn estimate_ns(name: &str) -> Option<f64> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| weir_tests::repo_root().join("target"));
    let file = target
        .join("criterion")
        .join("stage_call")
        .join(name)
        .join("new")
        .join("estimates.json");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    json["median"]["point_estimate"].as_f64()
}

fn summary() {
    let names = [
        "noop_0.2.0",
        "copy_0.2.0",
        "noop_0.2.1",
        "copy_0.2.1",
        "copy_native",
    ];
    let [
        Some(noop0),
        Some(copy0),
        Some(noop1),
        Some(copy1),
        Some(native),
    ] = names.map(estimate_ns)
    else {
        println!("summary: estimates not found (was a filter given?)");
        return;
    };
    let (noop1, copy1) = (noop1 / BATCH as f64, copy1 / BATCH as f64);
    println!("\nstage call summary (median ns per document; 0.2.1 in batches of {BATCH}):");
    println!("  noop stage, 0.2.0 per document   {noop0:>8.0} ns");
    println!("  noop stage, 0.2.1 batched        {noop1:>8.0} ns");
    println!("  copy-fields, 0.2.0 per document  {copy0:>8.0} ns");
    println!("  copy-fields, 0.2.1 batched       {copy1:>8.0} ns");
    println!("  same copy, native Rust           {native:>8.0} ns");
    println!(
        "  copy 0.2.0 / native              {:>8.1}x",
        copy0 / native
    );
    println!(
        "  copy 0.2.1 / native              {:>8.1}x",
        copy1 / native
    );
    println!("  copy 0.2.1 / copy 0.2.0          {:>8.2}x", copy1 / copy0);
    println!("  noop 0.2.1 / noop 0.2.0          {:>8.2}x", noop1 / noop0);
}

criterion_group!(benches, stage_calls);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
