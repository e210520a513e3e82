//! The mass-delete guard through the `weir` binary: a sync whose source
//! lost more than `[state] max_delete_share` of what its state knew is
//! refused with the numbers and deletes nothing (OpenSearch, and Kafka
//! mode); `--allow-deletes` lets it through; a small delete passes; the
//! summary's `deleted` count is exact; and a run killed while it holds its
//! markers has committed no state change made after them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use weir_tests::{Proc, with_plugins};

use crate::search::{opensearch_indexer, os, unique};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// The file connector reading `data/in.jsonl` incrementally.
const FILES: &str = r#"{ path = @file-connector, config = { paths = ["/data/in.jsonl"], incremental = true }, grants = { dirs = [{ host = "data", guest = "/data" }] } }"#;

/// The JSONL indexer appending to `out/out.jsonl`.
const JSONL: &str = r#"path = @jsonl-indexer, config = { path = "/out/out.jsonl", append = true }, grants = { dirs = [{ host = "out", guest = "/out", writable = true }] }"#;

/// A folder with `data/`, `out/` and a config `run.toml` running connector
/// `plugin` (an inline table) into `indexer` (a plugin table's inside).
struct Guarded {
    dir: tempfile::TempDir,
    pipeline: String,
}

/// What one `weir run` printed, and its exit code.
struct Ran {
    code: i32,
    output: String,
}

impl Ran {
    /// The connector's figure in column `column` of the summary.
    fn figure(&self, column: &str) -> u64 {
        let mut lines = self.output.lines();
        let header = lines
            .find(|l| l.starts_with("connector ") && l.contains(column))
            .unwrap_or_else(|| panic!("no summary: {}", self.output));
        let at = header
            .split_whitespace()
            .position(|c| c == column)
            .expect("the column");
        let row = lines
            .find(|l| l.starts_with("source "))
            .unwrap_or_else(|| panic!("no row: {}", self.output));
        row.split_whitespace()
            .nth(at)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {column} in {row}"))
    }

    fn deleted(&self) -> u64 {
        self.figure("deleted")
    }
}

impl Guarded {
    fn new(plugin: &str, indexer: &str, settings: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let pipeline = format!("guard_{:08x}", fastrand::u32(..));
        for sub in ["data", "out"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
        }
        let config = with_plugins(&format!(
            r#"
            {settings}
            [[connectors]]
            name = "source"
            pipeline = "{pipeline}"
            plugin = {plugin}
            [[pipelines]]
            name = "{pipeline}"
            [indexer]
            batch_size = 100
            plugin = {{ {indexer} }}
            "#
        ));
        std::fs::write(dir.path().join("run.toml"), config).expect("config");
        Self { dir, pipeline }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The source: records `r<n>` for each `n` of `numbers`.
    fn write(&self, numbers: impl IntoIterator<Item = usize>) {
        let records: BTreeMap<String, String> = numbers
            .into_iter()
            .map(|n| (format!("r{n:05}"), format!("v{n}")))
            .collect();
        let lines: String = records
            .iter()
            .map(|(id, t)| format!("{{\"id\":\"{id}\",\"t\":\"{t}\"}}\n"))
            .collect();
        std::fs::write(self.path("data/in.jsonl"), lines).expect("source");
    }

    /// `weir run` to its end.
    fn run(&self, extra: &[&str]) -> Ran {
        let output = std::process::Command::new(WEIR)
            .arg("run")
            .arg("--no-progress")
            .args(extra)
            .arg(self.path("run.toml"))
            .output()
            .expect("weir starts");
        let code = output.status.code().unwrap_or(-1);
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        print!("{output}");
        Ran { code, output }
    }

    /// The ids of the deletion markers the JSONL indexer wrote.
    fn deletes_written(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
            .filter(|l| l["_deleted"] == Value::Bool(true))
            .map(|l| l["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Lines the JSONL indexer wrote.
    fn lines_written(&self) -> usize {
        std::fs::read_to_string(self.path("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

/// Documents in OpenSearch index `index`.
fn os_count(index: &str) -> u64 {
    let (status, answer) = os("GET", &format!("{index}/_count"), None);
    assert_eq!(status, 200, "{answer}");
    answer["count"].as_u64().expect("count")
}

/// `output` names every one of `parts`.
fn assert_says(output: &str, parts: &[&str]) {
    for part in parts {
        assert!(output.contains(part), "`{part}` is not said:\n{output}");
    }
}

#[test]
fn a_source_that_lost_most_of_what_the_state_knew_is_refused_and_deletes_nothing_in_opensearch() {
    let index = unique("guard");
    let sync = Guarded::new(FILES, &opensearch_indexer(&index, ""), "");
    sync.write(0..1000);
    let first = sync.run(&[]);
    assert_eq!(first.code, 0);
    assert_eq!(os_count(&index), 1000);
    assert_eq!(first.deleted(), 0);

    // A small delete passes: 30 of 1,000, each counted once.
    sync.write(30..1000);
    let small = sync.run(&[]);
    assert_eq!(small.code, 0);
    assert_eq!(small.deleted(), 30, "the summary counts the deletes done");
    assert_eq!(os_count(&index), 970);

    // The source now holds 10 of the 970 records the state knows (as a copy
    // of the config reading a 10-line source would): 960 deletes, over
    // max(10, 0.5 x 970) = 485.
    sync.write(30..40);
    let refused = sync.run(&[]);
    assert_eq!(refused.code, 1, "the run fails");
    assert_says(
        &refused.output,
        &[
            "refused by the mass-delete guard",
            "more than 485 documents",
            "486 deletion markers",
            "970 keys",
            "[state] max_delete_share = 0.5",
            "--allow-deletes",
            "none of its deletes reached the indexer",
        ],
    );
    assert_eq!(refused.deleted(), 0);
    assert_eq!(os_count(&index), 970, "nothing was deleted");

    // Refused again: the state still knows all 970.
    let again = sync.run(&[]);
    assert_eq!(again.code, 1);
    assert_says(&again.output, &["970 keys"]);
    assert_eq!(os_count(&index), 970);

    // Allowed: every one of the 960 goes, and only those.
    let allowed = sync.run(&["--allow-deletes"]);
    assert_eq!(allowed.code, 0);
    assert_eq!(allowed.deleted(), 960);
    assert_eq!(os_count(&index), 10);
    let (_, kept) = os("GET", &format!("{index}/_doc/r00035"), None);
    assert_eq!(kept["found"], Value::Bool(true), "{kept}");

    // Then nothing is left to delete.
    let after = sync.run(&[]);
    assert_eq!(after.code, 0);
    assert_eq!((after.deleted(), after.figure("published")), (0, 0));
    assert_eq!(os_count(&index), 10);
}

#[test]
fn a_share_set_in_the_config_is_the_limit_and_one_out_of_range_is_refused() {
    let dir = Guarded::new(FILES, JSONL, "[state]\nmax_delete_share = 0.1");
    dir.write(0..200);
    assert_eq!(dir.run(&[]).code, 0);
    // 21 of 200: over max(10, 0.1 x 200) = 20.
    dir.write(21..200);
    let refused = dir.run(&[]);
    assert_eq!(refused.code, 1);
    assert_says(
        &refused.output,
        &["more than 20 documents", "21 deletion markers", "200 keys"],
    );
    assert!(dir.deletes_written().is_empty());
    // 20 of them pass. The refused run did not end cleanly, so this one is
    // a full sync: the 20 go by its sweep, and the file holds the source.
    dir.write(20..200);
    let passed = dir.run(&[]);
    assert_eq!(passed.code, 0);
    assert!(
        passed.output.contains("did not end cleanly") && passed.output.contains("sweep sent"),
        "{}",
        passed.output
    );
    assert_eq!(dir.lines_written(), 180, "{}", passed.output);
    assert!(dir.deletes_written().is_empty());

    let wrong = Guarded::new(FILES, JSONL, "[state]\nmax_delete_share = 1.5");
    let output = std::process::Command::new(WEIR)
        .arg("validate")
        .arg(wrong.path("run.toml"))
        .output()
        .expect("weir starts");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_ne!(output.status.code(), Some(0), "{said}");
    assert_says(&said, &["state.max_delete_share", "from 0 to 1"]);
}

#[test]
fn in_kafka_mode_a_refused_run_sends_no_marker_to_the_pipeline() {
    let settings = format!(
        "[worker]\nthreads = 1\n[kafka]\nbootstrap_servers = {:?}\ntopic_partitions = 2",
        weir_tests::kafka_bootstrap()
    );
    let sync = Guarded::new(FILES, JSONL, &settings);
    let config = sync.path("run.toml");
    let mut pairs = Proc::start(
        "worker-indexer",
        Path::new(WEIR),
        &[
            "worker-indexer",
            config.to_str().expect("path"),
            &sync.pipeline,
        ],
        &[],
        &sync.path("worker-indexer.log"),
    );
    sync.write(0..200);
    let first = sync.run(&["--mode", "kafka"]);
    assert_eq!(first.code, 0);
    let written = sync.lines_written();
    assert!(written >= 200, "{written}");

    // 150 of 200 gone: over max(10, 0.5 x 200) = 100.
    sync.write(150..200);
    let refused = sync.run(&["--mode", "kafka"]);
    assert_eq!(refused.code, 1);
    assert_says(
        &refused.output,
        &[
            "more than 100 documents",
            "101 deletion markers",
            "200 keys",
        ],
    );
    assert!(
        sync.deletes_written().is_empty(),
        "no marker was sent to the pipeline"
    );
    // The refused run did not end cleanly: this one is a full sync, whose
    // sweep leaves the file holding exactly the 50 records left.
    let allowed = sync.run(&["--mode", "kafka", "--allow-deletes"]);
    assert_eq!(allowed.code, 0, "{}", allowed.output);
    assert_eq!(allowed.deleted(), 150);
    let held: BTreeSet<String> = std::fs::read_to_string(sync.path("out/out.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|l| l["_deleted"] != Value::Bool(true))
        .map(|l| l["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    let expected: BTreeSet<String> = (150..200).map(|n| format!("r{n:05}")).collect();
    assert_eq!(held, expected, "each gone record deleted, the rest kept");
    assert!(pairs.stop(), "the worker-indexer stops cleanly");
}

#[test]
fn a_run_killed_while_it_holds_its_markers_keeps_the_state_they_would_change() {
    // 100 keys kept; then 40 of them deleted (within max(10, 0.5 x 100)),
    // and the connector goes on for 3 s before its execute returns.
    let connector = r#"{ path = @test-connector, config = { sync_keys = 100, delete_kept = 40, sleep_ms = 3000 } }"#;
    let sync = Guarded::new(connector, JSONL, "");
    assert_eq!(sync.run(&[]).code, 0);
    assert!(sync.lines_written() >= 100);

    let config = sync.path("run.toml");
    let log = sync.path("killed.log");
    let mut run = Proc::start(
        "weir run",
        Path::new(WEIR),
        &["run", "--no-progress", config.to_str().expect("path")],
        &[],
        &log,
    );
    assert!(
        run.wait_for_log(&log, "deleted 40 kept keys", 1, Duration::from_secs(120)),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // Time for a few of the runner's state commits (every 500 ms): one
    // that wrongly took a removal made after a held marker would happen.
    std::thread::sleep(Duration::from_millis(1500));
    run.kill_hard();
    assert!(
        sync.deletes_written().is_empty(),
        "held markers never reached the indexer"
    );

    // The state still knows all 100: the same 40 are deleted, once, now.
    let next = sync.run(&[]);
    assert_eq!(next.code, 0);
    assert_eq!(next.deleted(), 40);
    let expected: Vec<String> = (0..40).map(|n| format!("s{n:07}")).collect();
    let mut deleted = sync.deletes_written();
    deleted.sort();
    assert_eq!(deleted, expected);

    // Their removals were kept: 60 keys now, and 40 more is over 30.
    let refused = sync.run(&[]);
    assert_eq!(refused.code, 1);
    assert_says(
        &refused.output,
        &["more than 30 documents", "31 deletion markers", "60 keys"],
    );
    assert_eq!(sync.deletes_written().len(), 40);
}
