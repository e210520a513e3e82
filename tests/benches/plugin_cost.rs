//! What each bundled stage costs per document through the `weir` binary,
//! next to the same work done natively, in one run.
//!
//! - `weir`: the release binary as a process, as users run it (`weir run`):
//!   file connector -> the stage -> nop indexer, 2 worker threads, default
//!   limits (stage batches of 64), on generated ~870-byte documents (those
//!   of `binary_ab.py` and issue 25). The stage's cost is its run's CPU time
//!   over that of the same pipeline with no stage, per document: of the
//!   worker threads (from the run summary: the stage's calls and work, the
//!   steadier figure) and of the whole process (user + system, every
//!   thread, from its rusage: the connector's and indexer's share too).
//!   The pipeline runs `WEIR_BENCH_COPIES` (default 10) copies of the stage
//!   in a row and the cost is per copy, so that a stage's microsecond stands
//!   out of the machine's noise (later copies of trim-whitespace find
//!   nothing left to trim; each copy of rename-fields moves the field on).
//! - `native`: the stage's transform on the host's `Document`, natively, on
//!   the same documents (parsing left out), on this thread.
//!
//! `apply-regex` runs twice natively: with the `regex` crate's engines (what
//! `perf` compiles in: lazy DFA, one-pass, backtracker, literal prefilters)
//! and with only its PikeVM, which is all the crate has without `perf`.
//! Other builds of the apply-regex component (for example with other
//! `regex` features) are measured beside the bundled one when named in
//! `WEIR_BENCH_REGEX_VARIANTS` (`name=path.wasm[@copies],...`; one copy
//! unless said: a slow engine's cost stands out by itself).
//!
//! `WEIR_BIN=target/release/weir cargo bench -p weir-tests --bench plugin_cost`
//! (`WEIR_BENCH_DOCS`, default 100,000; `WEIR_BENCH_ROUNDS`, default 3: the
//! median is reported, rounds going through the cases in alternating order).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use weir::core::document::{Document, UpdateMode};

#[path = "common/corpus.rs"]
mod corpus;
#[path = "common/file_to_nop.rs"]
mod file_to_nop;
#[path = "common/measure.rs"]
mod measure;
use corpus::generate;
use measure::{env_number, thread_cpu_ns};

const PATTERN: &str = r"[\w.]+@[\w.]+";

/// One stage as measured: its component, its config (TOML), how many
/// copies of it the pipeline runs, and the same transform natively.
///
/// In the config, `{i}` is the copy's number (none for the first) and
/// `{next}` the next one's, so that copies can each move a field on.
struct Case {
    name: String,
    component: PathBuf,
    config: &'static str,
    copies: usize,
    native: Option<Transform>,
}

/// A stage's work done natively on one document.
type Transform = Box<dyn Fn(&mut Document)>;

impl Case {
    /// The TOML of copy `copy`'s config.
    fn config_of(&self, copy: usize) -> String {
        let i = if copy == 0 {
            String::new()
        } else {
            copy.to_string()
        };
        self.config
            .replace("{i}", &i)
            .replace("{next}", &(copy + 1).to_string())
    }
}

fn regex_with_every_engine() -> regex::Regex {
    regex::Regex::new(PATTERN).expect("pattern")
}

/// The PikeVM alone, as the `regex` crate runs without `perf`.
fn regex_pikevm_only() -> regex_automata::meta::Regex {
    regex_automata::meta::Regex::builder()
        .configure(
            regex_automata::meta::Config::new()
                .hybrid(false)
                .dfa(false)
                .onepass(false)
                .backtrack(false)
                .auto_prefilter(false),
        )
        .build(PATTERN)
        .expect("pattern")
}

fn texts(doc: &Document, name: &str) -> Vec<String> {
    doc.get_all(name)
        .filter_map(weir::core::document::value_as_text)
        .collect()
}

fn cases(dist: &Path, copies: usize) -> Vec<Case> {
    let wasm = |name: &str| dist.join(format!("{}.wasm", name.replace('-', "_")));
    let case = |name: &str, config, native: Transform| Case {
        name: name.to_owned(),
        component: wasm(name),
        config,
        copies,
        native: Some(native),
    };
    let every = regex_with_every_engine();
    let pikevm = regex_pikevm_only();
    let mut cases = vec![
        case(
            "trim-whitespace",
            r#"{ fields = ["title"] }"#,
            Box::new(|doc| {
                if let Some(Value::String(title)) = doc.get("title") {
                    let trimmed = title.trim().to_owned();
                    doc.set("title", Value::String(trimmed)).expect("set");
                }
            }),
        ),
        case(
            "copy-fields",
            r#"{ mappings = [{ source = "title", target = "title_copy" }] }"#,
            Box::new(|doc| {
                let values: Vec<Value> = doc.get_all("title").cloned().collect();
                doc.set("title_copy", values[0].clone()).expect("set");
            }),
        ),
        case(
            "split-field-values",
            r#"{ source = "tags", delimiter = ";" }"#,
            Box::new(|doc| {
                let pieces = texts(doc, "tags")
                    .iter()
                    .flat_map(|t| t.split(';'))
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| Value::String(p.to_owned()))
                    .collect();
                doc.set_all("tags", pieces).expect("set");
            }),
        ),
        case(
            "apply-regex",
            r#"{ source = "body", target = "emails", pattern = '[\w.]+@[\w.]+' }"#,
            Box::new(move |doc| {
                // As the stage does: captures, the first group or the match.
                let mut found = Vec::new();
                for text in texts(doc, "body") {
                    for caps in every.captures_iter(&text) {
                        if let Some(m) = caps.get(1).or_else(|| caps.get(0)) {
                            found.push(Value::String(m.as_str().to_owned()));
                        }
                    }
                }
                if !found.is_empty() {
                    doc.set_all("emails", found).expect("set");
                }
            }),
        ),
        Case {
            name: "apply-regex (native: PikeVM only)".into(),
            component: PathBuf::new(),
            config: "",
            copies: 0,
            native: Some(Box::new(move |doc| {
                let mut found = Vec::new();
                for text in texts(doc, "body") {
                    for caps in pikevm.captures_iter(&text) {
                        if let Some(span) = caps.get_group(1).or_else(|| caps.get_group(0)) {
                            found.push(Value::String(text[span.range()].to_owned()));
                        }
                    }
                }
                if !found.is_empty() {
                    doc.set_all("emails", found).expect("set");
                }
            })),
        },
        case(
            "concatenate",
            r#"{ target = "label", format = "{author} ({year})" }"#,
            Box::new(|doc| {
                let text = |name| doc.get_string(name).unwrap_or_default();
                let label = format!("{} ({})", text("author"), text("year"));
                doc.set("label", Value::String(label)).expect("set");
            }),
        ),
        case(
            "set-static-values",
            r#"{ values = { source = "catalog" } }"#,
            Box::new(|doc| {
                doc.set("source", json!("catalog")).expect("set");
            }),
        ),
        case(
            "rename-fields",
            r#"{ mappings = [{ source = "author{i}", target = "author{next}" }] }"#,
            Box::new(|doc| {
                doc.rename("author", "writer", UpdateMode::Overwrite)
                    .expect("rename");
            }),
        ),
        case(
            "drop-document",
            r#"{ field = "year", values = ["1999"] }"#,
            Box::new(|doc| {
                if texts(doc, "year").iter().any(|y| y == "1999") {
                    doc.set_dropped(true);
                }
            }),
        ),
    ];
    for variant in std::env::var("WEIR_BENCH_REGEX_VARIANTS")
        .unwrap_or_default()
        .split(',')
        .filter(|v| !v.is_empty())
    {
        let (name, path) = variant
            .split_once('=')
            .expect("WEIR_BENCH_REGEX_VARIANTS: name=path.wasm[@copies],...");
        let (path, copies) = path.rsplit_once('@').map_or((path, 1), |(path, n)| {
            (path, n.parse().expect("copies: a number"))
        });
        cases.push(Case {
            name: format!("apply-regex ({name})"),
            component: PathBuf::from(path),
            config: r#"{ source = "body", target = "emails", pattern = '[\w.]+@[\w.]+' }"#,
            copies,
            native: None,
        });
    }
    cases
}

/// A run config: file connector -> every copy of `case`'s stage (none: no
/// stage) -> nop indexer.
fn run_config(dir: &Path, dist: &Path, case: Option<&Case>) -> String {
    let stages = case.map_or_else(String::new, |case| {
        let copies: Vec<String> = (0..case.copies)
            .map(|copy| {
                format!(
                    "{{ name = \"stage-{copy}\", plugin = {{ path = {:?}, config = {} }} }}",
                    case.component.display().to_string(),
                    case.config_of(copy)
                )
            })
            .collect();
        format!("stages = [{}]", copies.join(", "))
    });
    file_to_nop::run_config(dir, dist, "input.jsonl", 500, &stages)
}

/// What one `weir run` cost: the whole process's CPU seconds (user +
/// system, from its rusage), and its worker threads' (from the summary).
#[derive(Clone, Copy)]
struct Cpu {
    process: f64,
    workers: f64,
}

/// CPU seconds (user + system) of the children this process has waited for.
fn children_cpu() -> f64 {
    // SAFETY: a zeroed rusage is a valid out-value for getrusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// `weir run config`, timed: the process's CPU is what waiting for it adds
/// to this process's children's (it is the only child running).
fn weir_cpu(weir: &Path, config: &Path) -> Cpu {
    let before = children_cpu();
    let output = Command::new(weir)
        .args(["run", "--no-progress"])
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .expect("run weir");
    let process = children_cpu() - before;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "weir run {} failed: {}",
        config.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Cpu {
        process,
        workers: workers_cpu(&stdout).unwrap_or_else(|| panic!("no worker CPU in:\n{stdout}")),
    }
}

/// The workers' CPU seconds from the run summary's line
/// `CPU in this process: connectors 1.2s (..), workers 80.64ms (..), ...`.
fn workers_cpu(summary: &str) -> Option<f64> {
    let line = summary
        .lines()
        .find(|l| l.starts_with("CPU in this process:"))?;
    let after = line.split("workers ").nth(1)?;
    let text = after.split_whitespace().next()?;
    let (number, scale) = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(unit, scale)| Some((text.strip_suffix(unit)?, *scale)))?;
    Some(number.parse::<f64>().ok()? * scale)
}

/// CPU nanoseconds per document of `transform` on the documents of
/// `input`, parsed in chunks beforehand (parsing is not timed).
fn native_ns(input: &Path, transform: &dyn Fn(&mut Document)) -> f64 {
    let reader = BufReader::new(std::fs::File::open(input).expect("open input"));
    let (mut cpu, mut count) = (0u128, 0usize);
    let mut chunk = Vec::with_capacity(10_000);
    let mut lines = reader.lines().peekable();
    while lines.peek().is_some() {
        chunk.clear();
        chunk.extend(
            lines
                .by_ref()
                .take(10_000)
                .map(|l| Document::from_json_str(&l.expect("read")).expect("document")),
        );
        let start = thread_cpu_ns();
        for doc in &mut chunk {
            transform(doc);
        }
        cpu += thread_cpu_ns() - start;
        count += chunk.len();
    }
    cpu as f64 / count.max(1) as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let docs = env_number("WEIR_BENCH_DOCS", 100_000);
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let copies = env_number("WEIR_BENCH_COPIES", 10).max(1);
    let weir = PathBuf::from(std::env::var("WEIR_BIN").unwrap_or_else(|_| {
        panic!("set WEIR_BIN to a release `weir` binary (cargo build --release -p weir)")
    }));
    let dist = weir_tests::plugins_dir().to_owned();
    let work = tempfile::tempdir().expect("tempdir");
    let input = work.path().join("input.jsonl");
    generate(&input, docs);
    let cases = cases(&dist, copies);

    let write = |name: &str, case: Option<&Case>| {
        let path = work.path().join(format!("{name}.toml"));
        std::fs::write(&path, run_config(work.path(), &dist, case)).expect("config");
        path
    };
    let baseline = write("baseline", None);
    let configs: Vec<Option<PathBuf>> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| (c.copies > 0).then(|| write(&format!("case-{i}"), Some(c))))
        .collect();
    // One untimed run of each compiles its components into the cache.
    for config in std::iter::once(&baseline).chain(configs.iter().flatten()) {
        weir_cpu(&weir, config);
    }

    let started = Instant::now();
    let mut base: Vec<Cpu> = Vec::new();
    let mut with: Vec<Vec<Cpu>> = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        base.push(weir_cpu(&weir, &baseline));
        let mut order: Vec<usize> = (0..cases.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            if let Some(config) = &configs[i] {
                with[i].push(weir_cpu(&weir, config));
            }
        }
        base.push(weir_cpu(&weir, &baseline));
    }
    let us = |seconds: f64| seconds * 1e6 / docs as f64;
    let medians = |runs: &[Cpu]| {
        (
            us(median(runs.iter().map(|c| c.workers).collect())),
            us(median(runs.iter().map(|c| c.process).collect())),
        )
    };
    let (base_workers, base_process) = medians(&base);
    let spread = |f: fn(&Cpu) -> f64| {
        let values: Vec<f64> = base.iter().map(|c| us(f(c))).collect();
        let low = values.iter().copied().fold(f64::MAX, f64::min);
        let high = values.iter().copied().fold(0.0, f64::max);
        format!("{low:.2}-{high:.2}")
    };
    println!(
        "{docs} documents, {rounds} rounds, {copies} copies of each stage ({:.0} s); no stage: workers {base_workers:.2} us CPU/doc \
         (runs {}), whole process {base_process:.2} (runs {})",
        started.elapsed().as_secs_f64(),
        spread(|c| c.workers),
        spread(|c| c.process),
    );
    println!(
        "{:<36} {:>8} {:>12} {:>12} {:>10} {:>7}",
        "stage (us per document)", "size KB", "weir workers", "weir process", "native", "ratio"
    );
    for (i, case) in cases.iter().enumerate() {
        let native = case
            .native
            .as_ref()
            .map(|t| native_ns(&input, t.as_ref()) / 1e3);
        let weir = (!with[i].is_empty()).then(|| {
            let (workers, process) = medians(&with[i]);
            let per_copy = case.copies as f64;
            (
                (workers - base_workers) / per_copy,
                (process - base_process) / per_copy,
            )
        });
        let size = std::fs::metadata(&case.component)
            .map(|m| format!("{:.0}", m.len() as f64 / 1e3))
            .unwrap_or_default();
        let show = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        let ratio = match (weir, native) {
            (Some((w, _)), Some(n)) if n > 0.0 => format!("{:.1}x", w / n),
            _ => "-".to_owned(),
        };
        println!(
            "{:<36} {:>8} {:>12} {:>12} {:>10} {:>7}",
            case.name,
            size,
            show(weir.map(|w| w.0)),
            show(weir.map(|w| w.1)),
            show(native),
            ratio
        );
    }
}
