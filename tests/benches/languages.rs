//! What each plugin language costs, in one run: the conformance stage
//! (`plugins/conformance/`) in Rust, Python and JavaScript, each as a
//! document stage (one `process-document` call per document, the path
//! contract 0.2.0 stages run on) beside a batch stage (`process-batch`,
//! contract 0.2.1, [`BATCH`] documents per call).
//!
//! - In process, per component: size; first compile (to native code,
//!   written to a fresh cache); a cached load (a new runtime reading that
//!   cache); instantiation (`start` included); and per-document CPU and wall
//!   time of the conformance stage's operations on a ~1 KB document.
//! - Through the binary, as users run it: `weir run` (this build's release
//!   binary, or `WEIR_BIN`) of generated documents through the `copy`
//!   operation, one worker thread, default limits; the workers' CPU per
//!   document, less that of the same run without the stage. Median of
//!   `WEIR_BENCH_ROUNDS` rounds (default 3) of `WEIR_BENCH_DOCS` documents
//!   (default 50,000), with the range.
//!
//! `WEIR_BENCH_VARIANTS=name=path.wasm,...` adds other builds of the
//! conformance stage (an older SDK's, say) to the runs through the binary,
//! measured in the same rounds.
//!
//! The Rust document stage is the 0.2.0 build kept in
//! `tests/fixtures/contract-0.2.0`; the Python and JavaScript ones are the
//! same sources built with `per-document-stage`. Ratios are against Rust's
//! batch path. Run with `cargo bench -p weir-tests --bench languages`
//! (builds the Python and JavaScript components through their SDKs when not
//! cached).

#[path = "common/measure.rs"]
mod measure;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use weir::core::document::Document;
use weir::plugin::{PluginRuntime, PluginSpec, RuntimeOptions, StageInstance};
use weir_tests::{doc, plugin, plugins_dir, repo_root, sdk_component};

const LANGS: [&str; 3] = ["rust", "python", "js"];
/// Documents per in-process round: four batches.
const DOCS: usize = 256;
const ROUNDS: usize = 15;
/// Documents per `process-batch` call: the default `batch.size`.
const BATCH: usize = 64;

/// How a stage is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Calls {
    /// `process-document`, one call per document (contract 0.2.0's stage path).
    Document,
    /// `process-batch`, [`BATCH`] documents per call (contract 0.2.1).
    Batch,
}

impl Calls {
    const BOTH: [Calls; 2] = [Calls::Document, Calls::Batch];

    fn label(self) -> &'static str {
        match self {
            Calls::Document => "per doc",
            Calls::Batch => "batched",
        }
    }
}

/// The conformance stage of `lang`, built to be called as `calls` says.
fn component(lang: &str, calls: Calls) -> PathBuf {
    let sources = repo_root()
        .join("plugins/conformance")
        .join(lang)
        .join("stage");
    match (lang, calls) {
        ("rust", Calls::Document) => {
            repo_root().join("tests/fixtures/contract-0.2.0/conformance_stage.wasm")
        }
        ("rust", Calls::Batch) => plugin("conformance-stage"),
        (_, Calls::Document) => sdk_component(lang, "per-document-stage", &sources),
        (_, Calls::Batch) => sdk_component(lang, "stage", &sources),
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

fn runtime(cache: &Path) -> PluginRuntime {
    PluginRuntime::new(RuntimeOptions {
        cache_dir: Some(cache.to_owned()),
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Run every document of `docs` (fresh copies) through `stage` as `calls` says.
fn run_all(stage: &mut StageInstance, docs: &[Document], calls: Calls) {
    let mut docs = docs.to_vec();
    match calls {
        Calls::Document => {
            for d in &mut docs {
                stage.process(d).expect("process");
            }
        }
        Calls::Batch => {
            for batch in docs.chunks_mut(BATCH) {
                let outcomes = stage.process_batch(batch).expect("process-batch");
                assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
            }
        }
    }
}

/// One component's setup costs.
struct Setup {
    lang: &'static str,
    calls: Calls,
    batch: bool,
    size: u64,
    compile_ms: f64,
    load_ms: f64,
    instantiate_ms: f64,
}

/// Per-document (wall ns, CPU ns) of one operation of one component.
struct PerDoc {
    lang: &'static str,
    calls: Calls,
    op: &'static str,
    wall: f64,
    cpu: f64,
}

fn in_process(ops: &[(&'static str, Value)]) -> (Vec<Setup>, Vec<PerDoc>) {
    let mut setup = Vec::new();
    let mut per_doc = Vec::new();
    let docs: Vec<Document> = (0..DOCS).map(sample).collect();
    for lang in LANGS {
        for calls in Calls::BOTH {
            let file = component(lang, calls);
            let size = std::fs::metadata(&file).expect("component").len();
            let cache = tempfile::tempdir().expect("cache dir");
            let spec = |config: &Value| PluginSpec::new(&file, config.clone());
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
            setup.push(Setup {
                lang,
                calls,
                batch: stage.is_batch(),
                size,
                compile_ms,
                load_ms,
                instantiate_ms: instantiate_ns / 1e6,
            });
            for (op, config) in ops {
                let mut instance = warm
                    .load_stage(*op, &spec(config))
                    .expect("load")
                    .instantiate()
                    .expect("instantiate");
                let (wall, cpu) = measure::per_item(ROUNDS, DOCS, || {
                    run_all(&mut instance, &docs, calls);
                });
                per_doc.push(PerDoc {
                    lang,
                    calls,
                    op,
                    wall,
                    cpu,
                });
            }
        }
    }
    (setup, per_doc)
}

/// The `weir` binary to time: `WEIR_BIN`, else this build's.
fn weir_binary() -> PathBuf {
    std::env::var_os("WEIR_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_weir-under-test")),
        PathBuf::from,
    )
}

/// A run config: `docs` generated documents like [`sample`]'s through
/// `stage` (none for the baseline), one worker thread, a no-op indexer.
fn run_config(dir: &Path, docs: usize, stage: Option<&Path>) -> PathBuf {
    let dist = plugins_dir();
    let fields = json!({
        "title": "The quick brown fox jumps over the lazy dog",
        "tags": "fox; dog ; classic;pangram",
        "year": 2026,
        "rating": -4.5,
        "body": "x".repeat(700),
    });
    let stages = stage.map_or_else(String::new, |path| {
        format!(
            r#"{{ name = "copy", plugin = {{ path = {path:?}, config = {{ op = "copy", from = "title", to = "title_copy" }} }} }}"#
        )
    });
    let toml = format!(
        r#"
        [runner]
        cache_dir = {cache:?}
        [worker]
        threads = 1
        [indexer]
        batch_size = 500
        plugin = {{ path = {indexer:?} }}
        [[connectors]]
        name = "gen"
        pipeline = "p"
        plugin = {{ path = {generator:?}, config = {{ count = {docs}, fields = {fields} }} }}
        [[pipelines]]
        name = "p"
        stages = [{stages}]
        "#,
        cache = dir.join("cache"),
        indexer = dist.join("nop_indexer.wasm"),
        generator = dist.join("generator_connector.wasm"),
        fields = toml_inline(&fields),
    );
    let file = dir.join(format!("run-{:08x}.toml", fastrand::u32(..)));
    std::fs::write(&file, toml).expect("config");
    file
}

/// A JSON object as a TOML inline table.
fn toml_inline(value: &Value) -> String {
    let entries: Vec<String> = value
        .as_object()
        .expect("object")
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    format!("{{ {} }}", entries.join(", "))
}

/// `weir run` of `config`: the workers' CPU microseconds per document, as
/// the run's summary reports them.
fn workers_us_per_doc(weir: &Path, config: &Path) -> f64 {
    let out = Command::new(weir)
        .args(["run", "--no-progress"])
        .arg(config)
        .output()
        .expect("weir run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "weir run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "CPU in this process: connectors 1.2s (3.4 us/doc), workers 1.2s (5.6 us/doc), ..."
    let line = stdout
        .lines()
        .find(|l| l.starts_with("CPU in this process"))
        .unwrap_or_else(|| panic!("no CPU line in the summary:\n{stdout}"));
    let workers = &line[line.find("workers").expect("workers")..];
    let number = &workers[workers.find('(').expect("(") + 1..workers.find(" us/doc").expect("us")];
    number.parse().expect("us/doc")
}

/// Per variant: the stage's CPU per document through the binary (median,
/// min, max over the rounds), less the no-stage run of the same round.
fn through_binary(variants: &[(String, Calls, PathBuf)]) -> (usize, Vec<(f64, f64, f64)>) {
    let docs = measure::env_number("WEIR_BENCH_DOCS", 50_000);
    let rounds = measure::env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let weir = weir_binary();
    let dir = tempfile::tempdir().expect("tempdir");
    let baseline = run_config(dir.path(), docs, None);
    let configs: Vec<PathBuf> = variants
        .iter()
        .map(|(_, _, path)| run_config(dir.path(), docs, Some(path)))
        .collect();
    // Compile every component into the run's cache before timing.
    for config in configs.iter().chain([&baseline]) {
        let status = Command::new(&weir)
            .arg("validate")
            .arg(config)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("weir validate");
        assert!(status.success(), "weir validate {}", config.display());
    }
    let mut costs: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        let base = workers_us_per_doc(&weir, &baseline);
        for (config, cost) in configs.iter().zip(&mut costs) {
            cost.push(workers_us_per_doc(&weir, config) - base);
        }
    }
    let summary = costs
        .into_iter()
        .map(|c| {
            let min = c.iter().copied().fold(f64::INFINITY, f64::min);
            let max = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (measure::median_of(c), min, max)
        })
        .collect();
    (docs, summary)
}

/// The builds `WEIR_BENCH_VARIANTS` names (`name=path.wasm,...`), batch
/// stages all.
fn extra_variants() -> Vec<(String, Calls, PathBuf)> {
    let listed = std::env::var("WEIR_BENCH_VARIANTS").unwrap_or_default();
    listed
        .split(',')
        .filter(|v| !v.trim().is_empty())
        .map(|variant| {
            let (name, path) = variant.split_once('=').unwrap_or_else(|| {
                panic!("WEIR_BENCH_VARIANTS: `{variant}` is not name=path.wasm")
            });
            let path = PathBuf::from(path.trim());
            assert!(
                path.is_file(),
                "WEIR_BENCH_VARIANTS: no file {}",
                path.display()
            );
            (name.trim().to_owned(), Calls::Batch, path)
        })
        .collect()
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
    let (setup, per_doc) = in_process(&ops);
    let mut variants: Vec<(String, Calls, PathBuf)> = LANGS
        .iter()
        .flat_map(|lang| Calls::BOTH.map(|calls| (lang.to_string(), calls, component(lang, calls))))
        .collect();
    variants.extend(extra_variants());
    let (binary_docs, binary) = through_binary(&variants);

    println!("plugin languages: the conformance stage, per document (0.2.0) and batched (0.2.1)");
    println!(
        "  {:<8} {:<8} {:>10} {:>15} {:>13} {:>15}",
        "", "", "size", "first compile", "cached load", "instantiation"
    );
    for s in &setup {
        let calls = if s.batch {
            ""
        } else {
            " (calls: per document)"
        };
        println!(
            "  {:<8} {:<8} {:>8.2} MB {:>12.0} ms {:>10.1} ms {:>12.2} ms{}",
            s.lang,
            s.calls.label(),
            s.size as f64 / 1e6,
            s.compile_ms,
            s.load_ms,
            s.instantiate_ms,
            if s.calls == Calls::Batch { calls } else { "" }
        );
    }
    println!(
        "  in process, per document (median of {ROUNDS} rounds of {DOCS}, batches of {BATCH}; CPU us, wall us, CPU / Rust batched, batched / per doc):"
    );
    let find = |lang: &str, calls: Calls, op: &str| {
        per_doc
            .iter()
            .find(|p| p.lang == lang && p.calls == calls && p.op == op)
    };
    for (op, _) in &ops {
        let rust = find("rust", Calls::Batch, op).map_or(f64::NAN, |p| p.cpu);
        for p in per_doc.iter().filter(|p| p.op == *op) {
            let speedup = match p.calls {
                Calls::Batch => find(p.lang, Calls::Document, op)
                    .map_or(String::new(), |d| format!("{:>8.2}x", p.cpu / d.cpu)),
                Calls::Document => String::new(),
            };
            println!(
                "  {op:<9} {:<7} {:<8} {:>8.2} {:>8.2} {:>8.1}x {speedup}",
                p.lang,
                p.calls.label(),
                p.cpu / 1e3,
                p.wall / 1e3,
                p.cpu / rust
            );
        }
    }
    println!(
        "  through the binary, copy: workers' CPU us per document less a run without the stage ({binary_docs} documents, 1 worker thread; median [min-max] of the rounds):"
    );
    for ((lang, calls, _), (median, min, max)) in variants.iter().zip(&binary) {
        println!(
            "  copy      {lang:<11} {:<8} {median:>8.2} [{min:.2}-{max:.2}]",
            calls.label()
        );
    }
}
