//! What `weir run` printed at the end of a run (host/src/cli/summary.rs),
//! read back for the benchmarks that run the binary: the run's own time,
//! documents, CPU time by kind of thread, and each stage's time in its calls.

// Each benchmark that includes this file uses some of it.
#![allow(dead_code)]

use std::time::Duration;

/// The figures of one run's summary.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// The run's own time, as its first line says it
    /// (`Run <id>: Success in 134.40ms`).
    pub elapsed: Duration,
    /// Documents the connectors' rows say succeeded, summed.
    pub succeeded: u64,
    /// CPU time of the threads that ran connectors, workers and indexers.
    pub connectors: Duration,
    pub workers: Duration,
    pub indexers: Duration,
    /// Each stage's name and mean time per document in its calls; the
    /// indexer's batches last, as `(indexer batches)`.
    pub stages: Vec<(String, Duration)>,
}

/// Read the summary `weir run` printed on standard output; panics when it
/// is not there, so a change to its layout cannot pass unnoticed.
pub fn parse(stdout: &str) -> RunSummary {
    let mut summary = RunSummary::default();
    let mut table = "";
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            Some("Run") if words.len() >= 5 && words[words.len() - 2] == "in" => {
                summary.elapsed = duration(words[words.len() - 1]);
            }
            Some("connector") | Some("stage") => table = words[0],
            Some("CPU") => {
                let after = |kind: &str| {
                    let at = words.iter().position(|w| *w == kind).expect(kind);
                    duration(words[at + 1])
                };
                summary.connectors = after("connectors");
                summary.workers = after("workers");
                summary.indexers = after("indexers");
            }
            Some("(indexer") => summary
                .stages
                .push(("indexer batches".into(), duration(words[words.len() - 2]))),
            // A connector's notes (`bench: full sync: ...`) follow its row.
            Some(name) if table == "connector" && words.len() >= 9 && !name.ends_with(':') => {
                summary.succeeded += words[4].parse::<u64>().unwrap_or_else(|_| {
                    panic!("no succeeded count for connector {name} in: {line}")
                });
            }
            Some(name) if table == "stage" && words.len() >= 8 => {
                let mean = duration(words[words.len() - 2]);
                summary.stages.push((name.to_owned(), mean));
            }
            _ => {}
        }
    }
    assert!(
        summary.succeeded > 0 && !summary.workers.is_zero(),
        "no run summary in weir's output:\n{stdout}"
    );
    summary
}

/// A duration as `{:.2?}` prints it: `5.87s`, `870.12ms`, `6.67µs`, `12ns`.
fn duration(text: &str) -> Duration {
    let (number, scale) = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or_else(|| panic!("not a duration: {text}"));
    let value: f64 = number
        .parse()
        .unwrap_or_else(|_| panic!("not a duration: {text}"));
    Duration::from_secs_f64(value * scale)
}
