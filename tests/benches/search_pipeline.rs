//! Indexing into a real OpenSearch: Weir against a direct bulk loader, in
//! one run.
//!
//! Both send the same documents (synthetic, ~1 KB, from one JSONL file) in
//! bulk requests of the same size, one request at a time:
//!
//! - `direct`: native Rust reads the file and posts `_bulk` requests
//!   itself (the fastest a single client can feed the cluster);
//! - `weir`: file-connector -> trim-whitespace -> opensearch-indexer, every
//!   one a sandboxed component, the requests made through `wasi:http`.
//!
//! The cluster does most of the work in both, so the ratio says how much
//! Weir adds on the way. Each phase writes a fresh index; rounds alternate
//! the two, and the median round of each is reported.
//!
//! `cargo bench -p weir-tests --bench search_pipeline` (WEIR_BENCH_DOCS,
//! default 50,000; WEIR_BENCH_ROUNDS, default 3). It starts OpenSearch with
//! `tests/search/opensearch.sh` unless `WEIR_OPENSEARCH_URL` names one.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use weir::messenger::LocalMessengers;
use weir::plugin::{PluginRuntime, RuntimeOptions};
use weir::run::{RunStatus, Runner};
use weir_tests::{http_grants, http_json, opensearch_url};

#[path = "common/measure.rs"]
mod measure;
use measure::{env_number, median_of as median, process_cpu_seconds};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: usize = 500;

fn generate(path: &Path, n: usize) {
    let mut out = BufWriter::new(std::fs::File::create(path).expect("create input"));
    let filler = "lorem ipsum dolor sit amet ".repeat(26);
    for i in 0..n {
        let doc = json!({
            "id": format!("doc-{i}"),
            "title": format!("  Document number {i} about weirs and rivers  "),
            "author": format!("Author {}", i % 997),
            "year": 1900 + (i % 125),
            "tags": ["river", "weir", format!("tag-{}", i % 31)],
            "body": &filler[..700],
        });
        serde_json::to_writer(&mut out, &doc).expect("write");
        out.write_all(b"\n").expect("write");
    }
    out.flush().expect("flush");
}

/// Create `index` with the settings both phases use (one shard, no
/// replicas, no refresh during the load).
fn fresh_index(index: &str) {
    let url = opensearch_url();
    http_json("DELETE", &format!("{url}/{index}"), None);
    let settings = json!({ "settings": { "number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1" } });
    let (status, answer) = http_json(
        "PUT",
        &format!("{url}/{index}"),
        Some(&settings.to_string()),
    );
    assert_eq!(status, 200, "{answer}");
}

fn count(index: &str) -> u64 {
    let url = opensearch_url();
    http_json("POST", &format!("{url}/{index}/_refresh"), None);
    let (_, answer) = http_json("GET", &format!("{url}/{index}/_count"), None);
    answer["count"].as_u64().unwrap_or(0)
}

/// Native: read the file, trim `title`, post bulk requests of `BATCH`.
fn direct(input: &Path, index: &str) -> usize {
    let url = format!("{}/_bulk", opensearch_url());
    let reader = BufReader::new(std::fs::File::open(input).expect("open input"));
    let mut body = String::new();
    let (mut docs, mut in_batch) = (0, 0);
    let send = |body: &mut String| {
        let (status, answer) = http_json("POST", &url, Some(body));
        assert!(
            status == 200 && answer["errors"] == false,
            "bulk failed: {status}"
        );
        body.clear();
    };
    for line in reader.lines() {
        let mut doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&line.expect("read")).expect("json");
        if let Some(serde_json::Value::String(title)) = doc.get_mut("title") {
            *title = title.trim().to_owned();
        }
        let id = doc["id"].as_str().expect("id").to_owned();
        body.push_str(&json!({ "index": { "_index": index, "_id": id } }).to_string());
        body.push('\n');
        body.push_str(&serde_json::Value::Object(doc).to_string());
        body.push('\n');
        docs += 1;
        in_batch += 1;
        if in_batch == BATCH {
            send(&mut body);
            in_batch = 0;
        }
    }
    if in_batch > 0 {
        send(&mut body);
    }
    docs
}

fn weir(dir: &Path, index: &str) -> (usize, f64, f64) {
    let dist = weir_tests::plugins_dir();
    let plugin = |name: &str| format!("{:?}", dist.join(name).display().to_string());
    let url = opensearch_url();
    let toml = format!(
        r#"
        [worker]
        threads = 2
        [indexer]
        batch_size = {BATCH}
        plugin = {{ path = {indexer}, config = {{ url = "{url}", index = "{index}" }}, grants = {{ http = {grants} }} }}
        [[connectors]]
        name = "bench"
        pipeline = "p"
        plugin = {{ path = {files}, config = {{ paths = ["/work/input.jsonl"] }}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/work" }}] }} }}
        [[pipelines]]
        name = "p"
        stages = [{{ name = "trim", plugin = {{ path = {trim}, config = {{ fields = ["title"] }} }} }}]
        "#,
        dir = dir.display().to_string(),
        grants = http_grants(url),
        indexer = plugin("opensearch_indexer.wasm"),
        files = plugin("file_connector.wasm"),
        trim = plugin("trim_whitespace.wasm"),
    );
    let config = weir::config::Config::parse(&toml, dir, std::iter::empty()).expect("config");
    let runtime = PluginRuntime::new(RuntimeOptions::default()).expect("runtime");
    let messengers = Arc::new(LocalMessengers {
        capacity: config.publisher.queue_capacity,
        max_bytes: config.publisher.queue_max_bytes(),
    });
    let runner = Runner::new(config, runtime, messengers);
    // Validation compiles the components (or loads them from the cache):
    // start-up, not indexing, so it is not timed.
    let plugins = runner.validate().expect("valid config");
    let (start, cpu) = (Instant::now(), process_cpu_seconds());
    let result = runner.run_validated(&plugins, "bench");
    let timed = (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    (result.connectors[0].succeeded as usize, timed.0, timed.1)
}

/// The direct loader, timed: documents, wall and CPU seconds.
fn direct_timed(input: &Path, index: &str) -> (usize, f64, f64) {
    let (start, cpu) = (Instant::now(), process_cpu_seconds());
    let docs = direct(input, index);
    (
        docs,
        start.elapsed().as_secs_f64(),
        process_cpu_seconds() - cpu,
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = env_number("WEIR_BENCH_DOCS", 50_000);
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input.jsonl");
    generate(&input, n);
    println!(
        "OpenSearch at {}; {n} documents, bulk requests of {BATCH}",
        opensearch_url()
    );
    // (docs/s, CPU µs per document) per round, per phase.
    let (mut direct_runs, mut weir_runs) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for phase in ["direct", "weir"] {
            let index = format!("bench-{phase}");
            fresh_index(&index);
            let (docs, seconds, cpu) = match phase {
                "direct" => direct_timed(&input, &index),
                _ => weir(dir.path(), &index),
            };
            assert_eq!(docs, n, "{phase} sent every document");
            assert_eq!(
                count(&index),
                n as u64,
                "{phase}: the cluster holds every document"
            );
            let (rate, cpu_us) = (docs as f64 / seconds, cpu * 1e6 / docs as f64);
            println!(
                "round {round}: {phase:<6} {rate:>9.0} docs/s ({seconds:.2} s), {cpu_us:.1} us CPU per document in this process"
            );
            if phase == "direct" {
                direct_runs.push((rate, cpu_us));
            } else {
                weir_runs.push((rate, cpu_us));
            }
            http_json("DELETE", &format!("{}/{index}", opensearch_url()), None);
        }
    }
    let (direct_rate, weir_rate) = (
        median(direct_runs.iter().map(|r| r.0).collect()),
        median(weir_runs.iter().map(|r| r.0).collect()),
    );
    let (direct_cpu, weir_cpu) = (
        median(direct_runs.iter().map(|r| r.1).collect()),
        median(weir_runs.iter().map(|r| r.1).collect()),
    );
    println!();
    println!(
        "file -> trim -> OpenSearch, median of {rounds} rounds (the cluster's own CPU not included):"
    );
    println!("                              docs/s   CPU us/doc");
    println!("  direct bulk loader (native) {direct_rate:>9.0} {direct_cpu:>10.1}");
    println!("  weir                        {weir_rate:>9.0} {weir_cpu:>10.1}");
    println!(
        "  weir / direct rate          {:>9.2}",
        weir_rate / direct_rate
    );
}
