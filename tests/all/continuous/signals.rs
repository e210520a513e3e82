//! `weir run` of a connector that never ends: SIGTERM drains it (every
//! document it published is indexed, its state committed, and the next run
//! goes on from there), a second signal stops it at once, and it logs a
//! report line every `runner.report_every`.

use std::time::{Duration, Instant};

use super::{Forever, LONG, contiguous, ended_within, signal, summary_row};

const REPORT: &str = "continuous connector `source` after";

#[test]
fn sigterm_drains_a_never_ending_run_and_the_next_run_goes_on_from_its_state() {
    let forever = Forever::new(
        "[runner]\ngrace_period = \"300s\"\nreport_every = \"1s\"\n[worker]\nthreads = 2",
        "rate = 2000.0",
        "",
        "",
    );
    let mut first = forever.run("first");
    forever.wait_indexed(&mut first, "first", 500);
    assert!(
        first.wait_for_log(&forever.log_path("first"), REPORT, 2, LONG),
        "a report line each second:\n{}",
        forever.log("first")
    );
    signal(&first, libc::SIGTERM);
    let status = ended_within(&mut first, LONG).expect("it drains and ends");
    let log = forever.log("first");
    assert_eq!(status.code(), Some(130), "interrupted:\n{log}");
    let row = summary_row(&log, "source");
    let indexed = forever.indexed();
    // Nothing lost: every document it published was indexed, once.
    assert_eq!(row["published"], row["succeeded"], "{row:?}\n{log}");
    assert_eq!(
        row["failed"] + row["dropped"] + row["duplicates"],
        0,
        "{row:?}"
    );
    assert_eq!(indexed.len() as u64, row["succeeded"], "{row:?}");
    let last = contiguous(&indexed, 0).unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert_eq!(last + 1, row["published"], "doc-0 to doc-{last}, each once");
    // The report line counts as the summary does.
    let reports = log.matches(REPORT).count();
    assert!(reports >= 2, "{reports} report lines:\n{log}");

    // The next run starts where the state says the first finished: at the
    // document after the last done (or at the last again, when the first
    // stopped between its publish and the state change after it).
    let before = indexed.len();
    let mut second = forever.run("second");
    forever.wait_indexed(&mut second, "second", before + 200);
    signal(&second, libc::SIGTERM);
    let status = ended_within(&mut second, LONG).expect("it drains and ends");
    assert_eq!(status.code(), Some(130), "{}", forever.log("second"));
    let all = forever.indexed();
    let from = all[before..].iter().min().copied().expect("indexed");
    assert!(
        from == last + 1 || from == last,
        "the second run starts at doc-{from}, after doc-{last}"
    );
    contiguous(&all, 0).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_second_signal_stops_a_draining_run_at_once() {
    // Every batch is refused (503) and retried for ever: documents stay in
    // flight, and the drain would wait an hour for them.
    let forever = Forever::new(
        "[runner]\ngrace_period = \"1h\"\nstall_timeout = \"1h\"\nreport_every = \"1s\"",
        "rate = 1000.0",
        "batch_failures = 4000000000",
        "max_retries = 1000000\nretry_backoff = \"50ms\"\nretry_max_backoff = \"100ms\"",
    );
    let mut run = forever.run("run");
    let log = forever.log_path("run");
    assert!(
        run.wait_for_log(&log, REPORT, 1, LONG),
        "{}",
        forever.log("run")
    );
    signal(&run, libc::SIGTERM);
    assert!(
        run.wait_for_log(&log, "interrupted: the connector stops", 1, LONG),
        "{}",
        forever.log("run")
    );
    let asked = Instant::now();
    signal(&run, libc::SIGTERM);
    let status = ended_within(&mut run, Duration::from_secs(60)).expect("it stops at once");
    let text = forever.log("run");
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(
        text.contains("interrupted again: stopping at once"),
        "{text}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(60),
        "{:?}",
        asked.elapsed()
    );
    assert!(forever.indexed().is_empty(), "nothing was indexed");
}
