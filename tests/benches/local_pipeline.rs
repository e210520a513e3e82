//! End-to-end local mode against a native-Rust baseline, in one run.
//!
//! Both read the same JSONL file of synthetic ~1 KB documents, apply the
//! same three transforms (trim `title`, copy `title` to `title_copy`, split
//! `tags` on `;`) and write JSONL:
//!
//! - `native`: one thread, serde_json and the host's `Document`, no WASM;
//! - `weir`: `weir run` machinery: file-connector -> trim-whitespace ->
//!   copy-fields -> split-field-values -> jsonl-indexer, every one a
//!   sandboxed component;
//! - the same two with CSV output (`csv-indexer`; natively, rows written by
//!   hand as the csv crate writes them).
//!
//! Each reports documents per second and CPU time (user + system, all
//! threads) per document.
//!
//! Each phase runs in a child process so its peak RSS is its own; weir runs
//! twice, at 1/10 and all of the documents, to show memory is flat in the
//! number of documents. The CSV phases run once more beside a process
//! spinning on every core, to show how wall time holds up on a busy machine
//! (wall / CPU), and Weir's CSV figures are set against Lucille's, measured
//! on the same workload for issue 13.
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
use weir::core::document::Document;
use weir::messenger::LocalMessengers;
use weir::plugin::{PluginRuntime, RuntimeOptions};
use weir::run::{RunStatus, Runner};

/// The allocator the `weir` binary uses, for both phases alike.
#[path = "common/measure.rs"]
mod measure;
use measure::process_cpu_seconds;

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

/// The same work as the WASM pipeline, natively; `csv`: CSV output.
fn native(input: &Path, output: &Path, csv: bool) -> usize {
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
        if csv {
            let mut row = Vec::with_capacity(256);
            for (i, column) in CSV_COLUMNS.iter().enumerate() {
                if i > 0 {
                    row.push(b',');
                }
                let text = match *column {
                    "id" => doc.id().to_owned(),
                    field => doc
                        .get_all(field)
                        .filter_map(weir::core::document::value_as_text)
                        .collect::<Vec<_>>()
                        .join("|"),
                };
                csv_field(&mut row, &text);
            }
            row.push(b'\n');
            out.write_all(&row).expect("write");
        } else {
            serde_json::to_writer(&mut out, &doc.to_json()).expect("write");
            out.write_all(b"\n").expect("write");
        }
        count += 1;
    }
    out.flush().expect("flush");
    count
}

/// Validate (compiling the components), then time only the run: documents,
/// wall seconds, CPU seconds. `csv`: the CSV indexer instead of JSONL.
fn weir_run(dir: &Path, threads: usize, csv: bool) -> (usize, f64, f64, String) {
    let dist = weir_tests::plugins_dir();
    let plugin = |name: &str| format!("{:?}", dist.join(name).display().to_string());
    let toml = format!(
        r#"
        [worker]
        threads = {threads}
        [indexer]
        batch_size = 500
        plugin = {{ path = {indexer}, config = {indexer_config}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/work", writable = true }}] }} }}
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
        indexer = plugin(if csv {
            "csv_indexer.wasm"
        } else {
            "jsonl_indexer.wasm"
        }),
        indexer_config = if csv {
            format!("{{ path = \"/work/weir.csv\", columns = {CSV_COLUMNS:?} }}")
        } else {
            "{ path = \"/work/weir.jsonl\" }".to_owned()
        },
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
    let (start, cpu) = (Instant::now(), process_cpu_seconds());
    let result = runner.run_validated(&plugins, "bench");
    let (seconds, cpu) = (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    // Each stage's mean time per document, in its calls (the run summary's).
    let stages = result
        .stages
        .iter()
        .map(|s| {
            let us = s.time.as_secs_f64() * 1e6 / s.documents.max(1) as f64;
            format!("{}={us:.2}", s.stage)
        })
        .collect::<Vec<_>>()
        .join(" ");
    // Each kind of thread's CPU time per document.
    let docs = result.connectors[0].succeeded;
    let per_doc = |d: std::time::Duration| d.as_secs_f64() * 1e6 / docs.max(1) as f64;
    let threads = format!(
        "connector={:.2} workers={:.2} indexer={:.2}",
        per_doc(result.cpu.connectors),
        per_doc(result.cpu.workers),
        per_doc(result.cpu.indexers)
    );
    (
        result.connectors[0].succeeded as usize,
        seconds,
        cpu,
        format!("{stages} | {threads}"),
    )
}

/// The CSV output's columns (`tags` multi-valued, joined with `|`).
const CSV_COLUMNS: [&str; 6] = ["id", "title", "title_copy", "author", "year", "tags"];

/// One CSV field, quoted when it must be (as the csv crate writes it).
fn csv_field(out: &mut Vec<u8>, text: &str) {
    if text.contains([',', '"', '\n', '\r']) {
        out.push(b'"');
        out.extend_from_slice(text.replace('"', "\"\"").as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(text.as_bytes());
    }
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

/// Child process: run one phase on `dir` and print `docs seconds cpu peak_kib`.
fn child(phase: &str, dir: &Path, threads: usize) {
    let (docs, seconds, cpu, stages) = match phase {
        "native" | "native-csv" => {
            let (start, cpu) = (Instant::now(), process_cpu_seconds());
            let csv = phase == "native-csv";
            let docs = native(&dir.join("input.jsonl"), &dir.join("native.out"), csv);
            (
                docs,
                start.elapsed().as_secs_f64(),
                process_cpu_seconds() - cpu,
                String::new(),
            )
        }
        "weir" => weir_run(dir, threads, false),
        "weir-csv" => weir_run(dir, threads, true),
        other => panic!("unknown phase {other}"),
    };
    println!("{docs} {seconds} {cpu} {} {stages}", peak_rss_kib());
}

struct Measured {
    docs: usize,
    seconds: f64,
    cpu: f64,
    peak_mib: f64,
    /// `stage=mean µs` per stage, for Weir.
    stages: String,
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
    let cpu = next().parse().expect("cpu");
    let peak_kib: f64 = next().parse().expect("kib");
    Measured {
        docs,
        seconds,
        cpu,
        peak_mib: peak_kib / 1024.0,
        stages: parts.collect::<Vec<_>>().join(" "),
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
    if let Some(threads) = arg("--hog") {
        hog(threads.parse().expect("hog threads"));
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
    let phases = ["native", "weir", "native-csv", "weir-csv"];
    let mut runs: Vec<Vec<Measured>> = phases.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (phase, measured) in phases.iter().zip(&mut runs) {
            measured.push(measure(phase, dir.path(), threads));
        }
    }
    let weir_small = measure("weir", small_dir.path(), threads);
    // The same on a busy machine: a process spinning on every core beside it.
    let busy: Vec<Measured> = {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut spinner = Command::new(std::env::current_exe().expect("exe"))
            .args(["--hog", &cores.to_string()])
            .spawn()
            .expect("start the CPU hog");
        let measured = ["native-csv", "weir-csv"]
            .iter()
            .map(|phase| measure(phase, dir.path(), threads))
            .collect();
        spinner.kill().expect("stop the CPU hog");
        spinner.wait().expect("reap the CPU hog");
        measured
    };
    let [native, weir, native_csv, weir_csv] = runs
        .into_iter()
        .map(median)
        .collect::<Vec<_>>()
        .try_into()
        .unwrap_or_else(|_| unreachable!("four phases"));
    for m in [&native, &weir, &native_csv, &weir_csv] {
        assert_eq!(m.docs, n);
    }
    assert_eq!(weir_small.docs, n / 10);

    let rate = |m: &Measured| m.docs as f64 / m.seconds;
    let cpu_us = |m: &Measured| m.cpu * 1e6 / m.docs as f64;
    println!(
        "\nlocal pipeline: file -> trim -> copy -> split -> jsonl or csv (median of {rounds} rounds)"
    );
    println!(
        "{:<28} {:>12} {:>10} {:>14} {:>14}",
        "", "docs/s", "seconds", "CPU us/doc", "peak RSS MiB"
    );
    for (name, m) in [
        ("native Rust, JSONL (1 thread)", &native),
        (&format!("weir, JSONL, {} docs", n / 10)[..], &weir_small),
        (&format!("weir, JSONL, {n} docs")[..], &weir),
        ("native Rust, CSV (1 thread)", &native_csv),
        (&format!("weir, CSV, {n} docs")[..], &weir_csv),
    ] {
        println!(
            "{name:<28} {:>12.0} {:>10.2} {:>14.2} {:>14.1}",
            rate(m),
            m.seconds,
            cpu_us(m),
            m.peak_mib
        );
    }
    println!(
        "weir per document, us: time in each stage's calls | CPU of each kind of thread:\n  JSONL {}\n  CSV   {}",
        weir.stages, weir_csv.stages
    );
    println!(
        "weir / native rate:          JSONL {:.2}, CSV {:.2}",
        rate(&weir) / rate(&native),
        rate(&weir_csv) / rate(&native_csv)
    );
    println!(
        "weir / native CPU per doc:   JSONL {:.2}, CSV {:.2}",
        cpu_us(&weir) / cpu_us(&native),
        cpu_us(&weir_csv) / cpu_us(&native_csv)
    );
    println!(
        "weir peak RSS, {n} / {} docs: {:.2}x",
        n / 10,
        weir.peak_mib / weir_small.peak_mib
    );
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!("\nbusy machine: CSV, one round beside a process spinning on all {cores} cores");
    println!(
        "{:<28} {:>12} {:>10} {:>14} {:>14}",
        "", "docs/s", "seconds", "CPU us/doc", "wall / CPU"
    );
    for (name, quiet, busy) in [
        ("native Rust, CSV", &native_csv, &busy[0]),
        ("weir, CSV", &weir_csv, &busy[1]),
    ] {
        for (when, m) in [("quiet", quiet), ("busy", busy)] {
            println!(
                "{:<28} {:>12.0} {:>10.2} {:>14.2} {:>14.2}",
                format!("{name}, {when}"),
                rate(m),
                m.seconds,
                cpu_us(m),
                m.seconds / m.cpu
            );
        }
    }
    // Lucille 0.11.1 on Java 25, measured on this kind of machine on the same
    // CSV workload (issue 13): a reference, not measured in this run.
    let (lucille_rate, lucille_cpu_us) = (40_000.0, 13.0);
    println!(
        "\nweir CSV against Lucille's reference ({lucille_rate:.0} docs/s, {lucille_cpu_us:.0} us CPU/doc): \
         {:.2}x the rate, {:.2}x the CPU per document",
        rate(&weir_csv) / lucille_rate,
        cpu_us(&weir_csv) / lucille_cpu_us
    );
}

/// Spin on `threads` threads until killed: the busy-machine rounds.
fn hog(threads: usize) -> ! {
    for _ in 1..threads {
        std::thread::spawn(spin);
    }
    spin()
}

fn spin() -> ! {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}
