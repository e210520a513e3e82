//! What isolation costs, in one run, on a no-op stage:
//!
//! - the call deadline: the same stage with and without epoch interruption
//!   (what every call pays for being interruptible);
//! - the instance policy: one instance reused for every document, against a
//!   fresh instance per document, with and without wasmtime's pooling
//!   allocator; and the time to make one instance (instantiate + `start`).
//!
//! `cargo bench -p weir-tests --bench instance_policy` (WEIR_BENCH_ROUNDS,
//! default 5; the median is shown).

use std::time::Instant;

use serde_json::json;
use weir::core::document::Document;
use weir::plugin::{
    InstancePolicy, PluginRuntime, PoolOptions, RuntimeOptions, StageInstance, StagePlugin,
};
use weir_tests::{doc, spec};

fn runtime(deadlines: bool, pool: bool) -> PluginRuntime {
    PluginRuntime::new(RuntimeOptions {
        cache_dir: None,
        deadlines,
        pool: pool.then_some(PoolOptions {
            instances: 64,
            max_memory_mib: 256,
        }),
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

fn noop(runtime: &PluginRuntime, policy: InstancePolicy) -> StagePlugin {
    let mut spec = spec("noop-stage", json!({}));
    spec.instance = policy;
    runtime.load_stage("noop", &spec).expect("load")
}

fn sample() -> Document {
    doc(json!({ "id": "bench-1", "title": "The quick brown fox", "body": "x".repeat(700) }))
}

/// Documents per second through `instance`, over `n` documents.
fn rate(instance: &mut StageInstance, n: usize) -> f64 {
    let mut d = sample();
    let start = Instant::now();
    for _ in 0..n {
        instance.process(&mut d).expect("process");
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Microseconds to make one started instance.
fn instantiate_us(plugin: &StagePlugin, n: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        drop(plugin.instantiate().expect("instantiate"));
    }
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds: usize = std::env::var("WEIR_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let (plain, no_deadline, pooled) = (
        runtime(true, false),
        runtime(false, false),
        runtime(true, true),
    );
    let mut with_deadline = noop(&plain, InstancePolicy::Reuse)
        .instantiate()
        .expect("start");
    let mut without_deadline = noop(&no_deadline, InstancePolicy::Reuse)
        .instantiate()
        .expect("start");
    let fresh_plugin = noop(&plain, InstancePolicy::Fresh);
    let fresh_pooled_plugin = noop(&pooled, InstancePolicy::Fresh);
    let mut fresh = fresh_plugin.instantiate().expect("start");
    let mut fresh_pooled = fresh_pooled_plugin.instantiate().expect("start");

    let (mut deadline, mut no_deadline_rates, mut fresh_rates, mut pooled_rates) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut inst, mut inst_pooled) = (Vec::new(), Vec::new());
    // Warm up, then interleave the rounds.
    rate(&mut with_deadline, 20_000);
    rate(&mut without_deadline, 20_000);
    rate(&mut fresh, 500);
    rate(&mut fresh_pooled, 500);
    for _ in 0..rounds {
        deadline.push(rate(&mut with_deadline, 200_000));
        no_deadline_rates.push(rate(&mut without_deadline, 200_000));
        fresh_rates.push(rate(&mut fresh, 5_000));
        pooled_rates.push(rate(&mut fresh_pooled, 5_000));
        inst.push(instantiate_us(&fresh_plugin, 2_000));
        inst_pooled.push(instantiate_us(&fresh_pooled_plugin, 2_000));
    }
    let (deadline, no_deadline_rate) = (median(deadline), median(no_deadline_rates));
    let (fresh_rate, pooled_rate) = (median(fresh_rates), median(pooled_rates));
    let (inst, inst_pooled) = (median(inst), median(inst_pooled));
    let ns = |rate: f64| 1e9 / rate;
    println!("\nNo-op stage, ~750-byte document, median of {rounds} rounds:");
    println!("{:<52} {:>12} {:>10}", "", "docs/s", "ns/doc");
    for (name, r) in [
        ("reused instance, with the call deadline", deadline),
        (
            "reused instance, no deadline (epochs off)",
            no_deadline_rate,
        ),
        ("fresh instance per document", fresh_rate),
        (
            "fresh instance per document, pooling allocator",
            pooled_rate,
        ),
    ] {
        println!("{name:<52} {r:>12.0} {:>10.0}", ns(r));
    }
    println!(
        "deadline cost: {:.2}x the time per call ({:+.0} ns)",
        ns(deadline) / ns(no_deadline_rate),
        ns(deadline) - ns(no_deadline_rate)
    );
    println!(
        "instantiate + start: {inst:.1} us on demand, {inst_pooled:.1} us pooled ({:.2}x)",
        inst / inst_pooled
    );
    println!(
        "fresh per document: {:.1}x slower than reuse on demand, {:.1}x pooled",
        deadline / fresh_rate,
        deadline / pooled_rate
    );
}
