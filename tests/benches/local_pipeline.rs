//! End-to-end local mode against a native-Rust baseline, in one run.
//!
//! Both read the same JSONL file of synthetic ~1 KB documents, apply the
//! same three transforms (trim `title`, copy `title` to `title_copy`, split
//! `tags` on `;`) and write JSONL:
//!
//! - `native`: one thread, serde_json and the host's `Document`, no WASM;
//! - `weir`: `weir run` machinery: file-connector -> trim-whitespace ->
//!   copy-fields -> split-field-values -> jsonl-indexer, every one a
//!   sandboxed component.
//!
//! Each phase runs in a child process so its peak RSS is its own; weir runs
//! twice, at 1/10 and all of the documents, to show memory is flat in the
//! number of documents.
//!
//! `cargo bench -p weir-tests --bench local_pipeline` (WEIR_BENCH_DOCS sets
//! the count, default 1,000,000; WEIR_BENCH_THREADS the worker threads;
//! WEIR_BENCH_ROUNDS the rounds, default 3, of which the median is shown).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use weir::document::Document;
use weir::messenger::LocalMessengers;
use weir::plugin::{PluginRuntime, RuntimeOptions};
use weir::run::{RunStatus, Runner};

/// The allocator the `weir` binary uses, for both phases alike.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn docs_wanted() -> usize {
    std::env::var("WEIR_BENCH_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn generate(path: &Path, n: usize) {
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

/// The same work as the WASM pipeline, natively.
fn native(input: &Path, output: &Path) -> usize {
    let reader = BufReader::new(std::fs::File::open(input).expect("open input"));
    let mut out = BufWriter::new(std::fs::File::create(output).expect("create output"));
    let mut count = 0;
    for line in reader.lines() {
        let line = line.expect("read");
        let mut doc = Document::from_json_str(&line).expect("document");
        if let Some(Value::String(title)) = doc.get("title") {
            let trimmed = title.trim().to_owned();
            doc.set("title", Value::String(trimmed)).expect("set");
        }
        let title = doc.get("title").cloned().expect("title");
        doc.set("title_copy", title).expect("set");
        let tags: Vec<Value> = doc
            .get_string("tags")
            .map(|t| {
                t.split(';')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| Value::String(s.to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        doc.set_all("tags", tags).expect("set");
        serde_json::to_writer(&mut out, &doc.to_json()).expect("write");
        out.write_all(b"\n").expect("write");
        count += 1;
    }
    out.flush().expect("flush");
    count
}

/// Validate (compiling the components), then time only the run.
fn weir_run(dir: &Path, threads: usize) -> (usize, f64) {
    let dist = weir_tests::plugins_dir();
    let plugin = |name: &str| format!("{:?}", dist.join(name).display().to_string());
    let toml = format!(
        r#"
        [worker]
        threads = {threads}
        [indexer]
        batch_size = 500
        plugin = {{ path = {jsonl}, config = {{ path = "/work/weir.jsonl" }}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/work", writable = true }}] }} }}
        [[connectors]]
        name = "bench"
        pipeline = "p"
        plugin = {{ path = {files}, config = {{ paths = ["/work/input.jsonl"] }}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/work" }}] }} }}
        [[pipelines]]
        name = "p"
        stages = [
            {{ name = "trim", plugin = {{ path = {trim}, config = {{ fields = ["title"] }} }} }},
            {{ name = "copy", plugin = {{ path = {copy}, config = {{ mappings = [{{ source = "title", target = "title_copy" }}] }} }} }},
            {{ name = "split", plugin = {{ path = {split}, config = {{ source = "tags", delimiter = ";" }} }} }},
        ]
        "#,
        dir = dir.display().to_string(),
        jsonl = plugin("jsonl_indexer.wasm"),
        files = plugin("file_connector.wasm"),
        trim = plugin("trim_whitespace.wasm"),
        copy = plugin("copy_fields.wasm"),
        split = plugin("split_field_values.wasm"),
    );
    let config = weir::config::Config::parse(&toml, dir, std::iter::empty()).expect("config");
    let runtime = PluginRuntime::new(RuntimeOptions {
        cache_dir: None,
        ..RuntimeOptions::default()
    })
    .expect("runtime");
    let messengers = Arc::new(LocalMessengers {
        capacity: config.publisher.queue_capacity,
        max_bytes: config.publisher.queue_max_bytes(),
    });
    let runner = Runner::new(config, runtime, messengers);
    let plugins = runner.validate().expect("valid config");
    let start = Instant::now();
    let result = runner.run_validated(&plugins, "bench");
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    (result.connectors[0].succeeded as usize, seconds)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Child process: run one phase on `dir` and print `docs seconds peak_kib`.
fn child(phase: &str, dir: &Path, threads: usize) {
    let (docs, seconds) = match phase {
        "native" => {
            let start = Instant::now();
            let docs = native(&dir.join("input.jsonl"), &dir.join("native.jsonl"));
            (docs, start.elapsed().as_secs_f64())
        }
        "weir" => weir_run(dir, threads),
        other => panic!("unknown phase {other}"),
    };
    println!("{docs} {seconds} {}", peak_rss_kib());
}

struct Measured {
    docs: usize,
    seconds: f64,
    peak_mib: f64,
}

fn measure(phase: &str, dir: &Path, threads: usize) -> Measured {
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new(exe)
        .args(["--phase", phase, "--dir"])
        .arg(dir)
        .args(["--threads", &threads.to_string()])
        .output()
        .expect("run phase");
    assert!(
        out.status.success(),
        "{phase} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().expect("phase output");
    let mut parts = line.split_whitespace();
    let mut next = || parts.next().expect("field").to_owned();
    let docs = next().parse().expect("docs");
    let seconds = next().parse().expect("seconds");
    let peak_kib: f64 = next().parse().expect("kib");
    Measured {
        docs,
        seconds,
        peak_mib: peak_kib / 1024.0,
    }
}

/// The run with the median time.
fn median(mut runs: Vec<Measured>) -> Measured {
    runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    runs.swap_remove(runs.len() / 2)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let threads = arg("--threads")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| {
            std::env::var("WEIR_BENCH_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2)
        });
    if let (Some(n), Some(dir)) = (arg("--generate"), arg("--dir")) {
        // For profiling one phase by hand: write the input, then run `--phase`.
        generate(
            &PathBuf::from(dir).join("input.jsonl"),
            n.parse().expect("count"),
        );
        return;
    }
    if let (Some(phase), Some(dir)) = (arg("--phase"), arg("--dir")) {
        child(&phase, &PathBuf::from(dir), threads);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list` / `cargo test --benches`
    }

    weir_tests::plugins_dir(); // build plugins before timing anything
    let n = docs_wanted();
    let small_dir = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    generate(&small_dir.path().join("input.jsonl"), n / 10);
    generate(&dir.path().join("input.jsonl"), n);
    let bytes = std::fs::metadata(dir.path().join("input.jsonl"))
        .expect("meta")
        .len();
    println!(
        "input: {n} documents, {:.0} bytes each on average; weir worker threads: {threads}",
        bytes as f64 / n as f64
    );

    // Interleaved rounds, median of each: the machine is noisy.
    let rounds: usize = std::env::var("WEIR_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let (mut natives, mut weirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        natives.push(measure("native", dir.path(), threads));
        weirs.push(measure("weir", dir.path(), threads));
    }
    let weir_small = measure("weir", small_dir.path(), threads);
    let native = median(natives);
    let weir = median(weirs);
    assert_eq!(native.docs, n);
    assert_eq!(weir.docs, n);
    assert_eq!(weir_small.docs, n / 10);

    let rate = |m: &Measured| m.docs as f64 / m.seconds;
    println!(
        "\nlocal pipeline: file -> trim -> copy -> split -> jsonl (median of {rounds} rounds)"
    );
    println!(
        "{:<28} {:>12} {:>10} {:>14}",
        "", "docs/s", "seconds", "peak RSS MiB"
    );
    for (name, m) in [
        ("native Rust (1 thread)", &native),
        (&format!("weir, {} docs", n / 10)[..], &weir_small),
        (&format!("weir, {n} docs")[..], &weir),
    ] {
        println!(
            "{name:<28} {:>12.0} {:>10.2} {:>14.1}",
            rate(m),
            m.seconds,
            m.peak_mib
        );
    }
    println!(
        "weir / native rate:          {:>11.2}",
        rate(&weir) / rate(&native)
    );
    println!(
        "weir peak RSS, {n} / {} docs: {:.2}x",
        n / 10,
        weir.peak_mib / weir_small.peak_mib
    );
}
