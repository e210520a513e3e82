//! What a stage call costs, in one run:
//!
//! - `noop`: a WASM stage that does nothing (call + document handle in and out);
//! - `copy_wasm`: copy-fields copying one field through the document resource;
//! - `copy_native`: the same copy done natively on the host's `Document`.
//!
//! Run with `cargo bench -p weir-tests --bench stage_call`. The summary at the
//! end prints ns per document and the ratios against the native baseline.

use std::time::Duration;

use criterion::{Criterion, criterion_group};
use serde_json::json;
use weir::core::document::Document;
use weir_tests::{runtime, spec};

fn sample() -> Document {
    weir_tests::sample_document("bench-1")
}

fn stage_calls(c: &mut Criterion) {
    let mut group = c.benchmark_group("stage_call");
    group.measurement_time(Duration::from_secs(4));

    let noop = runtime()
        .load_stage("noop", &spec("noop-stage", json!({})))
        .expect("load");
    let mut noop = noop.instantiate().expect("instantiate");
    let mut d = sample();
    group.bench_function("noop", |b| {
        b.iter(|| noop.process(&mut d).expect("process"))
    });

    let copy_config = json!({ "mappings": [{ "source": "title", "target": "title_copy" }] });
    let copy = runtime()
        .load_stage("copy", &spec("copy-fields", copy_config))
        .expect("load");
    let mut copy = copy.instantiate().expect("instantiate");
    let mut d = sample();
    group.bench_function("copy_wasm", |b| {
        b.iter(|| copy.process(&mut d).expect("process"))
    });

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
    let [noop, wasm, native] = ["noop", "copy_wasm", "copy_native"].map(estimate_ns);
    let (Some(noop), Some(wasm), Some(native)) = (noop, wasm, native) else {
        println!("summary: estimates not found (was a filter given?)");
        return;
    };
    println!("\nstage call summary (median ns per document):");
    println!("  noop stage (WASM)          {noop:>10.0} ns");
    println!("  copy-fields (WASM)         {wasm:>10.0} ns");
    println!("  same copy, native Rust     {native:>10.0} ns");
    println!("  WASM copy / native copy    {:>10.1}x", wasm / native);
    println!("  WASM copy - noop (work)    {:>10.0} ns", wasm - noop);
}

criterion_group!(benches, stage_calls);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
