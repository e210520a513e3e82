//! A run that never ends holds what is in flight, not what it has done:
//! hundreds of thousands of documents through a generator that never
//! ends, and the process's memory, the documents pending and what the
//! accounting sets aside stay where they were early in the run.

use std::path::Path;
use std::time::{Duration, Instant};

use weir_tests::{Proc, with_plugins};

use super::{LONG, WEIR, ended_within, signal, summary_row};

/// Resident memory of `pid`, in KiB.
fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

/// The value of `key=` in `line` (a text log line's field).
fn field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The report lines logged so far: (published, pending, held aside).
fn reports(log: &Path) -> Vec<(u64, u64, u64)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains("continuous connector `gen` after"))
        .filter_map(|line| {
            Some((
                field(line, "published")?,
                field(line, "pending")?,
                field(line, "held_aside")?,
            ))
        })
        .collect()
}

#[test]
fn a_never_ending_run_holds_what_is_in_flight_not_what_it_has_done() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gen.toml");
    std::fs::write(
        &config,
        with_plugins(
            r#"
            [runner]
            report_every = "1s"
            grace_period = "300s"
            [worker]
            threads = 2
            [[connectors]]
            name = "gen"
            pipeline = "live"
            continuous = true
            plugin = { path = @generator-connector, config = { forever = true, fields = { title = "a title" } } }
            [[pipelines]]
            name = "live"
            [indexer]
            batch_size = 200
            plugin = { path = @nop-indexer }
            "#,
        ),
    )
    .expect("config");
    let log = dir.path().join("gen.log");
    let mut run = Proc::start(
        "weir run",
        Path::new(WEIR),
        &["run", "--no-progress", config.to_str().expect("utf-8")],
        &[("RUST_LOG", "weir=info".to_owned())],
        &log,
    );
    let pid = run.child.id();
    // Memory once warm, then after many more documents.
    let at = |published: u64, run: &mut Proc| {
        let deadline = Instant::now() + LONG;
        loop {
            if reports(&log).last().is_some_and(|r| r.0 >= published) {
                return resident_kib(pid);
            }
            assert!(
                matches!(run.child.try_wait(), Ok(None)) && Instant::now() < deadline,
                "{published} documents were not published:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let warm = at(50_000, &mut run);
    let later = at(400_000, &mut run);
    signal(&run, libc::SIGTERM);
    let status = ended_within(&mut run, LONG).expect("it drains and ends");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(130), "{text}");
    let row = summary_row(&text, "gen");
    assert_eq!(row["published"], row["succeeded"], "{row:?}");
    assert!(row["published"] >= 400_000, "{row:?}");
    // Each report: what is pending is what the queues hold, and nothing is
    // set aside in a local run (no duplicates).
    for (published, pending, aside) in reports(&log) {
        assert!(pending <= 20_000, "{pending} pending at {published}");
        assert_eq!(aside, 0, "{aside} set aside at {published}");
    }
    eprintln!("resident memory: {warm} KiB warm, {later} KiB 350,000 documents later");
    assert!(
        later <= warm + 48 * 1024,
        "memory grew with the run: {warm} KiB at 50,000 documents, {later} KiB at 400,000"
    );
}
