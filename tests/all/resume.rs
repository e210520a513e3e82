//! A Kafka-mode run whose runner is killed mid-run is resumed by another
//! (`weir run --resume <run id>`), on a real broker: nothing published is
//! lost, nothing journaled is sent again, and the summary is the whole
//! run's, duplicates counted apart.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::accounting::{RECORDING_INDEXER, Setup, kafka_config};

/// The run id in a runner's log (`run{run_id="..."}`).
fn run_id_in(log: &str) -> Option<String> {
    let at = log.find("run_id=\"")? + "run_id=\"".len();
    let id: String = log[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (!id.is_empty()).then_some(id)
}

/// The distinct ids the indexers recorded.
fn indexed_ids(setup: &Setup) -> BTreeSet<String> {
    setup
        .indexed()
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|doc| doc["id"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_run_whose_runner_was_killed_is_resumed_with_an_exact_summary() {
    const DOCS: usize = 1500;
    // Published at 250 a second: the runner is killed about half way.
    let setup = Setup::new(
        "resume",
        &(kafka_config(
            &format!("{{ count = {DOCS} }}"),
            "",
            "",
            r#"liveness_timeout = "20s""#,
            RECORDING_INDEXER,
        ) + "\n[publisher]\nmax_docs_per_second = 250\n"),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    setup.wait_until_indexed(DOCS / 3);
    run.kill_hard();
    let before = indexed_ids(&setup).len();
    assert!(before < DOCS, "the run was killed before it published all");
    let log = setup.log("run");
    let run_id = run_id_in(&log).unwrap_or_else(|| panic!("no run id:\n{log}"));

    let mut resumed = setup.start(
        "resume",
        &[
            "run",
            "--mode",
            "kafka",
            "--no-progress",
            "--resume",
            &run_id,
        ],
        &[],
    );
    assert_eq!(
        setup.exit_code(&mut resumed, Duration::from_secs(120)),
        0,
        "{}",
        setup.log("resume")
    );
    let log = setup.log("resume");
    assert!(
        log.contains("resuming the connector where the run's last runner left it"),
        "{log}"
    );
    assert!(
        log.contains(&format!("Run {run_id}")),
        "the same run:\n{log}"
    );
    // published, children, succeeded, failed, dropped: the whole run's,
    // each document once; re-sent ones are duplicates, apart.
    let counts = setup.counts_in("resume", "docs");
    assert_eq!(counts[..5], [DOCS as u64, 0, DOCS as u64, 0, 0], "{log}");
    let ids = indexed_ids(&setup);
    assert_eq!(ids.len(), DOCS, "every document indexed");
    // Only what the killed runner published and had not yet journaled
    // (at most 200 ms of it, and what was in its producer) went again.
    let lines = setup.indexed().len();
    println!(
        "killed with {before} indexed; {lines} lines for {DOCS} documents; duplicates counted {}",
        counts[5]
    );
    assert!(lines - DOCS <= 200, "{lines} lines");
    assert!(worker.stop() && indexer.stop(), "both stop cleanly");
}

#[test]
fn resume_needs_kafka_mode_and_a_run_id() {
    let setup = Setup::new(
        "resume_args",
        &kafka_config("{ count = 1 }", "", "", "", RECORDING_INDEXER),
    );
    let mut local = setup.start("local", &["run", "--resume", "abc"], &[]);
    assert_eq!(setup.exit_code(&mut local, Duration::from_secs(30)), 2);
    assert!(setup.log("local").contains("--mode kafka"));
    let mut bad = setup.start(
        "bad",
        &["run", "--mode", "kafka", "--resume", "../etc"],
        &[],
    );
    assert_eq!(setup.exit_code(&mut bad, Duration::from_secs(30)), 2);
    assert!(setup.log("bad").contains("is not a run id"));
}
