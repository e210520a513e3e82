//! What each plugin language costs, in one run: the conformance stage
//! (`plugins/conformance/`) in Rust, Python and JavaScript.
//!
//! Per language: component size; first compile (to native code, written to
//! a fresh cache); a cached load (a new runtime reading that cache);
//! instantiation (a new instance, `start` included); and per-document wall
//! and CPU time of the conformance stage's operations on a ~1 KB document.
//! Ratios are against Rust. Run with
//! `cargo bench -p weir-tests --bench languages` (builds the Python and
//! JavaScript components through their SDKs when not cached).

#[path = "common/measure.rs"]
mod measure;

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};
use weir::core::document::Document;
use weir::plugin::{PluginRuntime, PluginSpec, RuntimeOptions};
use weir_tests::{doc, plugin, repo_root, sdk_component};

const LANGS: [&str; 3] = ["rust", "python", "js"];
const DOCS: usize = 200;
const ROUNDS: usize = 15;

fn component(lang: &str) -> PathBuf {
    match lang {
        "rust" => plugin("conformance-stage"),
        _ => sdk_component(
            lang,
            "stage",
            &repo_root()
                .join("plugins/conformance")
                .join(lang)
                .join("stage"),
        ),
    }
}

fn sample(i: usize) -> Document {
    doc(json!({
        "id": format!("doc-{i}"),
        "title": "The quick brown fox jumps over the lazy dog",
        "tags": "fox; dog ; classic;pangram",
        "year": 2026,
        "rating": -4.5,
        "items": [{ "k": 1 }, { "k": 2 }],
        "body": "x".repeat(700),
    }))
}

fn runtime(cache: &std::path::Path) -> PluginRuntime {
    PluginRuntime::new(RuntimeOptions {
        cache_dir: Some(cache.to_owned()),
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let ops: [(&str, Value); 4] = [
        (
            "copy",
            json!({ "op": "copy", "from": "title", "to": "title_copy" }),
        ),
        (
            "split",
            json!({ "op": "split", "field": "tags", "separator": ";" }),
        ),
        ("children", json!({ "op": "children", "field": "items" })),
        ("pass", json!({ "op": "fail" })),
    ];
    let mut setup = Vec::new();
    let mut per_doc: Vec<(&str, &str, (f64, f64))> = Vec::new();
    for lang in LANGS {
        let path = component(lang);
        let size = std::fs::metadata(&path).expect("component").len();
        let cache = tempfile::tempdir().expect("cache dir");
        let spec = |config: &Value| PluginSpec::new(&path, config.clone());
        let t = Instant::now();
        runtime(cache.path())
            .load_stage("first", &spec(&ops[0].1))
            .expect("compile");
        let compile_ms = millis(t);
        let warm = runtime(cache.path());
        let t = Instant::now();
        let stage = warm.load_stage("cached", &spec(&ops[0].1)).expect("load");
        let load_ms = millis(t);
        let (instantiate_ns, _) = measure::per_item(ROUNDS, 1, || {
            stage.instantiate().expect("instantiate");
        });
        setup.push((lang, size, compile_ms, load_ms, instantiate_ns / 1e6));
        for (op, config) in &ops {
            let mut instance = warm
                .load_stage(*op, &spec(config))
                .expect("load")
                .instantiate()
                .expect("instantiate");
            let docs: Vec<Document> = (0..DOCS).map(sample).collect();
            per_doc.push((
                lang,
                op,
                measure::per_item(ROUNDS, DOCS, || {
                    for d in &docs {
                        let mut d = d.clone();
                        instance.process(&mut d).expect("process");
                    }
                }),
            ));
        }
    }
    println!("plugin languages: the conformance stage");
    println!(
        "  {:<8} {:>10} {:>15} {:>13} {:>15}",
        "", "size", "first compile", "cached load", "instantiation"
    );
    for (lang, size, compile, load, inst) in &setup {
        println!(
            "  {lang:<8} {:>8.2} MB {compile:>12.0} ms {load:>10.1} ms {inst:>12.2} ms",
            *size as f64 / 1e6
        );
    }
    println!("  per document (median of {ROUNDS} rounds of {DOCS}; CPU us, wall us, CPU / Rust):");
    for (op, _) in &ops {
        let rust_cpu = per_doc
            .iter()
            .find(|(l, o, _)| *l == "rust" && o == op)
            .map_or(f64::NAN, |(_, _, (_, cpu))| *cpu);
        for (lang, _, (wall, cpu)) in per_doc.iter().filter(|(_, o, _)| o == op) {
            println!(
                "  {op:<9} {lang:<7} {:>8.2} {:>8.2} {:>8.1}x",
                cpu / 1e3,
                wall / 1e3,
                cpu / rust_cpu
            );
        }
    }
}
