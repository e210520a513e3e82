//! End-to-end local mode as users run it, against a native-Rust baseline
//! doing the same work, in one run.
//!
//! Every phase reads the same JSONL file of synthetic ~870-byte documents,
//! applies the same three transforms (trim `title`, copy `title` to
//! `title_copy`, split `tags` on `;`) and writes JSONL, or CSV:
//!
//! - `native`, the baseline: one thread, serde_json and the host's
//!   `Document`, no WASM (CSV rows written as the csv crate writes them);
//! - `weir`: the `weir` binary, as a process (`weir run --no-progress`):
//!   file-connector -> trim-whitespace -> copy-fields -> split-field-values
//!   -> jsonl-indexer or csv-indexer, every one a sandboxed component,
//!   default limits, 2 worker threads, batches of 500;
//! - `weir, 0.2.0 stages` (CSV): the same, with the three stages' contract
//!   0.2.0 builds (`tests/fixtures/contract-0.2.0`), called a document at a
//!   time, against the 0.2.1 builds called in batches;
//! - `weir, one map stage` (CSV): the same three edits as one `map` stage's
//!   jq program (naming the two fields it uses), against the three Rust
//!   stages;
//! - `weir in-process` (CSV): the same config run by the library inside a
//!   process of this bench, as `weir run` runs it less its command line
//!   (logging, signals, progress): what the binary adds, if anything;
//! - `Lucille` (CSV), when `WEIR_BENCH_LUCILLE` names a built Lucille
//!   (common/lucille.rs): its own file connector, stages and CSV indexer;
//!   each round also on 1/5 of the documents, for its steady state: (CPU of
//!   the whole run - CPU of the 1/5 run) / (4/5 of the documents), which
//!   leaves out the JVM's start-up and warm-up;
//! - `Benthos` (JSONL), when `go` is on the path (common/benthos.rs; the Go
//!   program in `benches/benthos`, built once per run): its `file` input,
//!   three bloblang `mutation` processors and `file` output, the same
//!   pipeline threads and batch size.
//!
//! Every phase is a process timed from outside: wall time, and the CPU time
//! (user + system, every thread) and peak RSS of the whole process from its
//! rusage, start-up and exit included. Rounds interleave the phases and the
//! ratios are taken within each round (the machine's speed drifts), with
//! their median and range. Weir's CPU is also split by kind of thread, from
//! its run summary. Weir JSONL runs once more on 1/10 of the documents (peak
//! RSS flat in the number of documents), and the CSV phases once more beside
//! a process spinning on every core (wall time on a busy machine).
//!
//! Start-up: each round, a warm (components compiled, cache filled)
//! one-document `weir run --no-progress` of the JSONL config, 5 tries: its
//! wall time from outside against the run's own time as its summary prints
//! it; the difference is what start-up and exit cost beyond the run (goal:
//! within 0.05 s). Benthos's and Lucille's one-document runs are timed too,
//! when they are present.
//!
//! `cargo bench -p weir-tests --bench local_pipeline`: `WEIR_BENCH_DOCS`
//! (default 1,000,000), `WEIR_BENCH_THREADS` (worker threads, default 2),
//! `WEIR_BENCH_ROUNDS` (default 3), `WEIR_BENCH_WEIR` (the `weir` binary to
//! time; default: the one this bench is built with, in the same profile as
//! a release build), `WEIR_BENCH_LUCILLE` and `WEIR_BENCH_JAVA`,
//! `WEIR_BENCH_BENTHOS` (a built Benthos instead of `go build`; `off` skips
//! it).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use weir::core::document::Document;

#[path = "common/benthos.rs"]
mod benthos;
#[path = "common/corpus.rs"]
mod corpus;
#[path = "common/lucille.rs"]
mod lucille;
#[path = "common/measure.rs"]
mod measure;
#[path = "common/process.rs"]
mod process;
#[path = "common/summary.rs"]
mod summary;

use corpus::generate;
use measure::{env_number, median_of};
use summary::RunSummary;

/// The allocator the `weir` binary uses, for the in-process phase.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Documents per indexer batch, for Weir, Lucille and Benthos alike.
const BATCH: usize = 500;

/// The CSV output's columns (`tags` multi-valued, joined with `|`).
const CSV_COLUMNS: [&str; 7] = [
    "id",
    "title",
    "title_copy",
    "author",
    "year",
    "tags",
    "rating",
];

/// The same work as the WASM pipeline, natively; `csv`: CSV output.
fn native(input: &Path, output: &Path, csv: bool) -> usize {
    let reader = BufReader::new(std::fs::File::open(input).expect("open input"));
    let mut out = BufWriter::new(std::fs::File::create(output).expect("create output"));
    let mut count = 0;
    let mut row = Vec::with_capacity(256);
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
            row.clear();
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

/// The three edits as the `map` stage's jq program: trim `title`, copy it
/// to `title_copy`, split `tags` on `;` (each part trimmed, empty ones
/// left out, a document without `tags` left as it is, as
/// split-field-values does).
const MAP_JQ: &str = r#".title |= trim | .title_copy = .title | if .tags then .tags |= [split(";")[] | trim | select(. != "")] else . end"#;

/// The run config of the Weir phases on `dir` (its `input.jsonl`), written
/// to `dir/<name>.toml`; `csv`: the CSV indexer instead of JSONL. The
/// components are compiled into `dir/cache` by an untimed first run.
fn weir_config(dir: &Path, name: &str, threads: usize, csv: bool) -> PathBuf {
    let dist = weir_tests::plugins_dir();
    let plugin = |name: &str| format!("{:?}", dist.join(name).display().to_string());
    // The `-020` phase runs the stages' contract 0.2.0 builds (called a
    // document at a time), beside the same stages on 0.2.1 (in batches).
    let stages = if name.ends_with("-020") {
        weir_tests::repo_root().join("tests/fixtures/contract-0.2.0")
    } else {
        dist.to_owned()
    };
    let stage = |name: &str| format!("{:?}", stages.join(name).display().to_string());
    let indexer = if csv {
        format!(
            "{{ path = {}, config = {{ path = \"/work/weir.csv\", columns = {CSV_COLUMNS:?} }}",
            plugin("csv_indexer.wasm")
        )
    } else {
        format!(
            "{{ path = {}, config = {{ path = \"/work/weir.jsonl\" }}",
            plugin("jsonl_indexer.wasm")
        )
    };
    let toml = format!(
        r#"
        [runner]
        cache_dir = {cache:?}
        [worker]
        threads = {threads}
        [indexer]
        batch_size = {BATCH}
        plugin = {indexer}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/work", writable = true }}] }} }}
        [[connectors]]
        name = "bench"
        pipeline = "p"
        plugin = {{ path = {files}, config = {{ paths = ["/work/input.jsonl"] }}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/work" }}] }} }}
        [[pipelines]]
        name = "p"
        {stages}
        "#,
        cache = dir.join("cache").display().to_string(),
        dir = dir.display().to_string(),
        files = plugin("file_connector.wasm"),
        stages = if name.ends_with("-map") {
            // The same three edits as one jq program (the `map` stage).
            format!(
                r#"stages = [{{ name = "map", plugin = {{ path = {map}, config = {{ jq = '{MAP_JQ}', fields = ["title", "tags"] }} }} }}]"#,
                map = plugin("map.wasm"),
            )
        } else {
            format!(
                r#"stages = [
            {{ name = "trim", plugin = {{ path = {trim}, config = {{ fields = ["title"] }} }} }},
            {{ name = "copy", plugin = {{ path = {copy}, config = {{ mappings = [{{ source = "title", target = "title_copy" }}] }} }} }},
            {{ name = "split", plugin = {{ path = {split}, config = {{ source = "tags", delimiter = ";" }} }} }},
        ]"#,
                trim = stage("trim_whitespace.wasm"),
                copy = stage("copy_fields.wasm"),
                split = stage("split_field_values.wasm"),
            )
        },
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml).expect("write the run config");
    path
}

/// The `weir` binary to time.
fn weir_binary() -> PathBuf {
    std::env::var_os("WEIR_BENCH_WEIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_weir-under-test")))
}

/// Child process: the run of `config` through the library, as `weir run`
/// does it (load, runner for local mode, validate, run), with no logging,
/// signals or progress. Prints the documents that succeeded.
fn in_process(config: &Path) {
    let config = weir::config::Config::load(config).expect("config");
    let runner = weir::topology::runner(config, weir::topology::Mode::Local).expect("runner");
    let plugins = runner.validate().expect("valid config");
    let result = runner.run_validated(&plugins, "bench");
    assert_eq!(result.status(), weir::run::RunStatus::Success, "{result:?}");
    println!("{}", result.connectors[0].succeeded);
}

/// What one phase took.
#[derive(Debug, Clone)]
struct Measured {
    docs: usize,
    seconds: f64,
    cpu: f64,
    peak_mib: f64,
    /// Weir's own figures, for the phases that run the binary.
    summary: Option<RunSummary>,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.docs as f64 / self.seconds
    }

    fn cpu_us(&self) -> f64 {
        self.cpu * 1e6 / self.docs as f64
    }
}

/// Everything a phase needs to know.
struct Setup {
    dir: PathBuf,
    threads: usize,
    lucille: Option<PathBuf>,
    benthos: Option<PathBuf>,
}

/// Run `phase` on `dir` as a process and measure it from outside.
fn measure(phase: &str, setup: &Setup, dir: &Path) -> Measured {
    let me = std::env::current_exe().expect("exe");
    let child = |args: &[&str]| {
        let mut command = Command::new(&me);
        command.args(args).arg("--dir").arg(dir);
        command
    };
    let mut command = match phase {
        "native" | "native-csv" => child(&["--phase", phase]),
        "weir" | "weir-csv" | "weir-csv-020" | "weir-csv-map" => {
            let mut command = Command::new(weir_binary());
            command
                .args(["run", "--no-progress"])
                .arg(dir.join(format!("{phase}.toml")));
            command
        }
        "in-process-csv" => child(&["--phase", phase]),
        "lucille-csv" => lucille::command(
            setup.lucille.as_deref().expect("a Lucille"),
            dir,
            &dir.join("input.jsonl"),
            &dir.join("lucille.csv"),
            &CSV_COLUMNS,
            setup.threads,
            BATCH,
        ),
        "benthos" => benthos::command(
            setup.benthos.as_deref().expect("a Benthos"),
            dir,
            &dir.join("input.jsonl"),
            &dir.join("benthos.jsonl"),
            setup.threads,
            BATCH,
        ),
        other => panic!("unknown phase {other}"),
    };
    let usage = process::timed(&mut command);
    let summary = phase
        .starts_with("weir")
        .then(|| summary::parse(&usage.stdout));
    let docs = match (&summary, phase) {
        (Some(summary), _) => usize::try_from(summary.succeeded).expect("count"),
        (None, "lucille-csv") => lucille::rows(&dir.join("lucille.csv")),
        (None, "benthos") => benthos::lines(&dir.join("benthos.jsonl")),
        (None, _) => usage.stdout.trim().parse().expect("the phase's count"),
    };
    Measured {
        docs,
        seconds: usage.wall,
        cpu: usage.cpu,
        peak_mib: usage.peak_kib as f64 / 1024.0,
        summary,
    }
}

/// The median of `f` over `runs`: the figure a table shows.
fn median_by(runs: &[Measured], f: impl Fn(&Measured) -> f64) -> f64 {
    median_of(runs.iter().map(f).collect())
}

/// `a / b` in each round: its median and range, as `1.23x [1.10-1.31]`.
fn ratio(a: &[Measured], b: &[Measured], f: impl Fn(&Measured) -> f64) -> String {
    let per_round: Vec<f64> = a.iter().zip(b).map(|(a, b)| f(a) / f(b)).collect();
    let (low, high) = per_round
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
    format!("{:.2}x [{low:.2}-{high:.2}]", median_of(per_round))
}

/// Weir's CPU per document by kind of thread, and the rest of the process
/// (its main thread, the plugins' file I/O, the epoch ticker), in µs.
fn threads_line(runs: &[Measured]) -> String {
    let us = |f: &dyn Fn(&RunSummary) -> std::time::Duration| {
        median_by(runs, |m| {
            let s = m.summary.as_ref().expect("weir's summary");
            f(s).as_secs_f64() * 1e6 / m.docs as f64
        })
    };
    let rest = median_by(runs, |m| {
        let s = m.summary.as_ref().expect("weir's summary");
        let threads = (s.connectors + s.workers + s.indexers).as_secs_f64();
        (m.cpu - threads) * 1e6 / m.docs as f64
    });
    format!(
        "connector {:.2} | workers {:.2} | indexer {:.2} | rest {rest:.2}",
        us(&|s| s.connectors),
        us(&|s| s.workers),
        us(&|s| s.indexers),
    )
}

/// Each stage's mean time per document in its calls (median over runs), µs.
fn stages_line(runs: &[Measured]) -> String {
    let first = runs[0].summary.as_ref().expect("weir's summary");
    (0..first.stages.len())
        .map(|i| {
            let us = median_by(runs, |m| {
                m.summary.as_ref().expect("summary").stages[i]
                    .1
                    .as_secs_f64()
                    * 1e6
            });
            format!("{}={us:.2}", first.stages[i].0)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let threads = env_number("WEIR_BENCH_THREADS", 2);
    if let (Some(n), Some(dir)) = (arg("--generate"), arg("--dir")) {
        // For profiling one phase by hand: write the input and the configs,
        // then run `weir run <dir>/weir-csv.toml` (or `--phase`).
        let dir = PathBuf::from(dir);
        generate(&dir.join("input.jsonl"), n.parse().expect("count"));
        weir_config(&dir, "weir", threads, false);
        weir_config(&dir, "weir-csv", threads, true);
        weir_config(&dir, "weir-csv-020", threads, true);
        return;
    }
    if let (Some(phase), Some(dir)) = (arg("--phase"), arg("--dir")) {
        let dir = PathBuf::from(dir);
        match phase.as_str() {
            "in-process-csv" => in_process(&dir.join("weir-csv.toml")),
            native_phase => {
                let csv = native_phase == "native-csv";
                let docs = native(&dir.join("input.jsonl"), &dir.join("native.out"), csv);
                println!("{docs}");
            }
        }
        return;
    }
    if let Some(threads) = arg("--hog") {
        hog(threads.parse().expect("hog threads"));
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list` / `cargo test --benches`
    }

    let n = env_number("WEIR_BENCH_DOCS", 1_000_000);
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let small_dir = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    // The start-up runs' one document, and Lucille's run on 1/5.
    let one_dir = tempfile::tempdir().expect("tempdir");
    let fifth_dir = tempfile::tempdir().expect("tempdir");
    let benthos = match benthos::binary(dir.path()) {
        Ok(path) => Some(path),
        Err(why) => {
            println!("Benthos phase skipped: {why}");
            None
        }
    };
    let setup = Setup {
        dir: dir.path().to_owned(),
        threads,
        lucille: lucille::from_env(),
        benthos,
    };
    generate(&small_dir.path().join("input.jsonl"), n / 10);
    generate(&dir.path().join("input.jsonl"), n);
    generate(&one_dir.path().join("input.jsonl"), 1);
    if setup.lucille.is_some() {
        generate(&fifth_dir.path().join("input.jsonl"), n / 5);
    }
    for (at, name, csv) in [
        (dir.path(), "weir", false),
        (dir.path(), "weir-csv", true),
        (dir.path(), "weir-csv-020", true),
        (dir.path(), "weir-csv-map", true),
        (small_dir.path(), "weir", false),
        (one_dir.path(), "weir", false),
    ] {
        let config = weir_config(at, name, threads, csv);
        // Untimed: compiles the components into the run's cache.
        process::timed(Command::new(weir_binary()).arg("validate").arg(config));
    }
    let bytes = std::fs::metadata(dir.path().join("input.jsonl"))
        .expect("meta")
        .len();
    println!(
        "input: {n} documents, {:.0} bytes each on average; {threads} worker threads, batches of {BATCH}\nweir: {}",
        bytes as f64 / n as f64,
        weir_binary().display()
    );

    let mut phases = vec![
        "native",
        "weir",
        "native-csv",
        "weir-csv",
        "weir-csv-020",
        "weir-csv-map",
        "in-process-csv",
    ];
    if setup.lucille.is_some() {
        phases.push("lucille-csv");
    }
    if setup.benthos.is_some() {
        phases.push("benthos");
    }
    let mut runs: Vec<Vec<Measured>> = phases.iter().map(|_| Vec::new()).collect();
    let mut lucille_fifth = Vec::new();
    let mut startup = Vec::new();
    let show = |round: usize, phase: &str, m: &Measured| {
        println!(
            "round {round} {phase:<15} {:>9.0} docs/s {:>8.2} us CPU/doc",
            m.rate(),
            m.cpu_us()
        );
    };
    for round in 1..=rounds {
        for (phase, measured) in phases.iter().zip(&mut runs) {
            let m = measure(phase, &setup, &setup.dir);
            assert_eq!(m.docs, n, "{phase}: every document through");
            show(round, phase, &m);
            measured.push(m);
        }
        if setup.lucille.is_some() {
            let m = measure("lucille-csv", &setup, fifth_dir.path());
            assert_eq!(m.docs, n / 5, "lucille-csv on 1/5: every document through");
            show(round, "lucille-csv 1/5", &m);
            lucille_fifth.push(m);
        }
        if round == 1 && setup.benthos.is_some() {
            // Benthos writes what Weir writes.
            benthos::assert_same_document(
                &setup.dir.join("weir.jsonl"),
                &setup.dir.join("benthos.jsonl"),
            );
        }
        let started = startup_round(&setup, one_dir.path());
        println!(
            "round {round} start-up        weir wall {:.3} s, run {:.3} s, beyond the run {:.3} s",
            started.weir_wall, started.weir_run, started.weir_beyond
        );
        startup.push(started);
    }
    let weir_small = measure("weir", &setup, small_dir.path());
    assert_eq!(weir_small.docs, n / 10);
    let busy = busy_rounds(&setup);
    let steady: Vec<Measured> = if setup.lucille.is_some() {
        let full = &runs[phases
            .iter()
            .position(|p| *p == "lucille-csv")
            .expect("lucille")];
        full.iter()
            .zip(&lucille_fifth)
            .map(|(full, fifth)| steady_state(full, fifth))
            .collect()
    } else {
        Vec::new()
    };
    let lucille = Lucille {
        fifth: lucille_fifth,
        steady,
    };
    report(&phases, &runs, &lucille, &weir_small, &busy, n);
    report_startup(&startup);
}

/// Lucille's runs on 1/5 of the documents, and its steady state (empty
/// without a Lucille).
struct Lucille {
    fifth: Vec<Measured>,
    steady: Vec<Measured>,
}

/// The steady state of a system from its whole run and its run on fewer
/// documents: the documents, time and CPU of the difference, which leaves
/// out start-up, warm-up and exit (the peak RSS is the whole run's).
fn steady_state(full: &Measured, part: &Measured) -> Measured {
    Measured {
        docs: full.docs - part.docs,
        seconds: full.seconds - part.seconds,
        cpu: full.cpu - part.cpu,
        peak_mib: full.peak_mib,
        summary: None,
    }
}

/// One-document runs per start-up round.
const STARTUP_TRIES: usize = 5;

/// One round of start-up figures, each the median of its tries, seconds.
struct Startup {
    weir_wall: f64,
    weir_cpu: f64,
    /// The run's own time, as its summary prints it.
    weir_run: f64,
    /// Process wall time beyond the run's own: start-up and exit.
    weir_beyond: f64,
    /// Wall and CPU of the peers' one-document runs, when present.
    benthos: Option<(f64, f64)>,
    lucille: Option<(f64, f64)>,
}

/// Warm one-document runs in `dir` (its components already compiled into
/// its cache): `weir run --no-progress` of the JSONL config, then Benthos
/// and Lucille when present.
fn startup_round(setup: &Setup, dir: &Path) -> Startup {
    let tries = |phase: &str| -> Vec<Measured> {
        (0..STARTUP_TRIES)
            .map(|_| {
                let m = measure(phase, setup, dir);
                assert_eq!(m.docs, 1, "start-up, {phase}: the one document through");
                m
            })
            .collect()
    };
    let weir = tries("weir");
    let run = |m: &Measured| {
        let elapsed = m.summary.as_ref().expect("weir's summary").elapsed;
        assert!(!elapsed.is_zero(), "no run time in weir's summary");
        elapsed.as_secs_f64()
    };
    let wall_cpu =
        |runs: Vec<Measured>| (median_by(&runs, |m| m.seconds), median_by(&runs, |m| m.cpu));
    Startup {
        weir_wall: median_by(&weir, |m| m.seconds),
        weir_cpu: median_by(&weir, |m| m.cpu),
        weir_run: median_by(&weir, run),
        weir_beyond: median_by(&weir, |m| m.seconds - run(m)),
        benthos: setup.benthos.is_some().then(|| wall_cpu(tries("benthos"))),
        lucille: setup
            .lucille
            .is_some()
            .then(|| wall_cpu(tries("lucille-csv"))),
    }
}

/// The CSV phases once more, beside a process spinning on every core.
fn busy_rounds(setup: &Setup) -> Vec<(&'static str, Measured)> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut spinner = Command::new(std::env::current_exe().expect("exe"))
        .args(["--hog", &cores.to_string()])
        .spawn()
        .expect("start the CPU hog");
    let measured = ["native-csv", "weir-csv"]
        .into_iter()
        .map(|phase| (phase, measure(phase, setup, &setup.dir)))
        .collect();
    spinner.kill().expect("stop the CPU hog");
    spinner.wait().expect("reap the CPU hog");
    measured
}

fn report(
    phases: &[&str],
    runs: &[Vec<Measured>],
    lucille: &Lucille,
    weir_small: &Measured,
    busy: &[(&str, Measured)],
    n: usize,
) {
    let of = |phase: &str| &runs[phases.iter().position(|p| *p == phase).expect(phase)][..];
    let rounds = runs[0].len();
    let rate = Measured::rate;
    let cpu_us = Measured::cpu_us;
    println!(
        "\nlocal pipeline: file -> trim -> copy -> split -> JSONL or CSV; each phase a process timed from outside (median of {rounds} rounds)"
    );
    println!(
        "{:<30} {:>10} {:>9} {:>11} {:>13}",
        "", "docs/s", "seconds", "CPU us/doc", "peak RSS MiB"
    );
    let small = std::slice::from_ref(weir_small);
    let mut rows = vec![
        ("native Rust, JSONL (1 thread)".to_owned(), of("native")),
        (format!("weir, JSONL, {} docs", n / 10), small),
        ("weir, JSONL".to_owned(), of("weir")),
        ("native Rust, CSV (1 thread)".to_owned(), of("native-csv")),
        ("weir, CSV".to_owned(), of("weir-csv")),
        ("weir, CSV, 0.2.0 stages".to_owned(), of("weir-csv-020")),
        ("weir, CSV, one map stage".to_owned(), of("weir-csv-map")),
        ("weir in-process, CSV".to_owned(), of("in-process-csv")),
    ];
    if phases.contains(&"lucille-csv") {
        rows.push(("Lucille, CSV".to_owned(), of("lucille-csv")));
        rows.push((format!("Lucille, CSV, {} docs", n / 5), &lucille.fifth));
        rows.push(("Lucille, CSV, steady state".to_owned(), &lucille.steady));
    }
    if phases.contains(&"benthos") {
        rows.push(("Benthos, JSONL".to_owned(), of("benthos")));
    }
    for (name, m) in &rows {
        println!(
            "{name:<30} {:>10.0} {:>9.2} {:>11.2} {:>13.1}",
            median_by(m, rate),
            median_by(m, |m| m.seconds),
            median_by(m, cpu_us),
            median_by(m, |m| m.peak_mib)
        );
    }
    println!(
        "\nweir CPU per document by thread, us (rest: main thread, plugins' file I/O, epoch ticker):"
    );
    println!("  JSONL  {}", threads_line(of("weir")));
    println!("  CSV    {}", threads_line(of("weir-csv")));
    println!("  0.2.0  {}", threads_line(of("weir-csv-020")));
    println!("  map    {}", threads_line(of("weir-csv-map")));
    println!("weir time per document in each stage's calls, us:");
    println!("  JSONL  {}", stages_line(of("weir")));
    println!("  CSV    {}", stages_line(of("weir-csv")));
    println!("  0.2.0  {}", stages_line(of("weir-csv-020")));
    println!("  map    {}", stages_line(of("weir-csv-map")));

    println!("\nratios in the same round: median [range over {rounds} rounds]");
    let pair = |name: &str, a: &[Measured], b: &[Measured]| {
        println!(
            "{name:<38} docs/s {}   CPU per document {}",
            ratio(a, b, rate),
            ratio(a, b, cpu_us)
        );
    };
    pair("weir / native, JSONL", of("weir"), of("native"));
    pair("weir / native, CSV", of("weir-csv"), of("native-csv"));
    pair(
        "weir 0.2.0 / 0.2.1 stages, CSV",
        of("weir-csv-020"),
        of("weir-csv"),
    );
    pair(
        "weir map / three Rust stages, CSV",
        of("weir-csv-map"),
        of("weir-csv"),
    );
    pair(
        "weir binary / in-process, CSV",
        of("weir-csv"),
        of("in-process-csv"),
    );
    if phases.contains(&"lucille-csv") {
        pair("weir / Lucille, CSV", of("weir-csv"), of("lucille-csv"));
        pair(
            "weir / Lucille steady state, CSV",
            of("weir-csv"),
            &lucille.steady,
        );
        pair("Lucille / native, CSV", of("lucille-csv"), of("native-csv"));
    }
    if phases.contains(&"benthos") {
        pair("weir / Benthos, JSONL", of("weir"), of("benthos"));
        pair("Benthos / native, JSONL", of("benthos"), of("native"));
    }
    println!(
        "weir peak RSS, {n} / {} docs: {:.2}x",
        n / 10,
        median_by(of("weir"), |m| m.peak_mib) / weir_small.peak_mib
    );

    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!("\nbusy machine: CSV, one round beside a process spinning on all {cores} cores");
    println!(
        "{:<30} {:>10} {:>9} {:>11} {:>13}",
        "", "docs/s", "seconds", "CPU us/doc", "wall / CPU"
    );
    for (phase, busy) in busy {
        let name = if phase.starts_with("weir") {
            "weir, CSV"
        } else {
            "native Rust, CSV"
        };
        let quiet = of(phase);
        for (when, seconds, cpu, docs_s, us) in [
            (
                "quiet",
                median_by(quiet, |m| m.seconds),
                median_by(quiet, |m| m.cpu),
                median_by(quiet, rate),
                median_by(quiet, cpu_us),
            ),
            ("busy", busy.seconds, busy.cpu, rate(busy), cpu_us(busy)),
        ] {
            println!(
                "{:<30} {docs_s:>10.0} {seconds:>9.2} {us:>11.2} {:>13.2}",
                format!("{name}, {when}"),
                seconds / cpu
            );
        }
    }
}

/// The start-up rounds: medians over rounds of each round's median.
fn report_startup(rounds: &[Startup]) {
    let spread = |values: Vec<f64>| {
        let (low, high) = values
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        format!("{:.3} s [{low:.3}-{high:.3}]", median_of(values))
    };
    let weir = |f: fn(&Startup) -> f64| spread(rounds.iter().map(f).collect());
    println!(
        "\nstart-up: a warm one-document run, timed from outside; median of {STARTUP_TRIES} tries per round, median [range] over {} rounds",
        rounds.len()
    );
    println!(
        "  weir run --no-progress: process wall {}, CPU {}",
        weir(|r| r.weir_wall),
        weir(|r| r.weir_cpu)
    );
    println!(
        "    the run's own time (its summary): {}",
        weir(|r| r.weir_run)
    );
    println!(
        "    start-up and exit beyond the run: {} (goal: within 0.050 s)",
        weir(|r| r.weir_beyond)
    );
    for (name, peer) in [
        ("Benthos", rounds.iter().map(|r| r.benthos).collect()),
        ("Lucille", rounds.iter().map(|r| r.lucille).collect()),
    ] {
        let peer: Option<Vec<(f64, f64)>> = peer;
        if let Some(peer) = peer {
            let (walls, cpus) = peer.into_iter().unzip();
            println!(
                "  {name}: process wall {}, CPU {}",
                spread(walls),
                spread(cpus)
            );
        }
    }
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
