//! Incremental sync through the `weir` binary: a connector's state kept
//! between runs (committed only when its documents are done), deletion
//! markers to the indexer, `--full`, and kill -9 in the middle of a sync.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use weir_tests::{Proc, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// A folder with `data/`, an output folder and a config running the
/// connector `plugin` (an inline table) into an appending JSONL file,
/// through `stages`.
pub(crate) struct Sync {
    dir: tempfile::TempDir,
    /// Unique per test: Kafka topics (and the state topic) are named by it.
    pipeline: String,
}

/// The file connector reading `data/in.jsonl` incrementally.
const FILES: &str = r#"{ path = @file-connector, config = { paths = ["/data/in.jsonl"], incremental = true }, grants = { dirs = [{ host = "data", guest = "/data" }] } }"#;

impl Sync {
    pub(crate) fn new(plugin: &str, stages: &str) -> Self {
        Self::with(plugin, stages, "[worker]\nthreads = 2")
    }

    /// [`Sync::new`] with more settings (`[kafka]`, say) in the config.
    pub(crate) fn with(plugin: &str, stages: &str, settings: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let pipeline = format!("sync_{:08x}", fastrand::u32(..));
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
            stages = [{stages}]
            [indexer]
            batch_size = 50
            plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/out.jsonl", append = true }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
            "#
        ));
        std::fs::write(dir.path().join("run.toml"), config).expect("config");
        Self { dir, pipeline }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The source: one record per (id, text).
    fn write(&self, records: &BTreeMap<String, String>) {
        let lines: String = records
            .iter()
            .map(|(id, t)| format!("{{\"id\":\"{id}\",\"t\":\"{t}\"}}\n"))
            .collect();
        std::fs::write(self.path("data/in.jsonl"), lines).expect("source");
    }

    /// `weir <role> <config> <pipeline>` (a serving process), logging to `<name>.log`.
    fn serve(&self, role: &str) -> Proc {
        let config = self.path("run.toml");
        Proc::start(
            role,
            Path::new(WEIR),
            &[role, config.to_str().expect("path"), &self.pipeline],
            &[],
            &self.path(&format!("{role}.log")),
        )
    }

    /// `weir run` to its end; its exit code.
    pub(crate) fn run(&self, extra: &[&str]) -> i32 {
        let output = std::process::Command::new(WEIR)
            .arg("run")
            .arg("--no-progress")
            .args(extra)
            .arg(self.path("run.toml"))
            .output()
            .expect("weir starts");
        print!("{}", String::from_utf8_lossy(&output.stderr));
        output.status.code().unwrap_or(-1)
    }

    /// Every line the indexer wrote, in order.
    pub(crate) fn indexed(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Rows of committed state.
    pub(crate) fn committed(&self) -> usize {
        let Ok(db) = rusqlite::Connection::open(self.path("weir-state.sqlite")) else {
            return 0;
        };
        // The connector's own state: the host's parts (`#meta`, ...) apart.
        db.query_row(
            "SELECT count(*) FROM connector_state WHERE scope NOT LIKE '%#%'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_or(0, |n| usize::try_from(n).unwrap_or(0))
    }
}

/// A stage of about 2 ms per document: a sync that takes seconds.
pub(crate) const SLOW: &str =
    r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 2000 } } }"#;

fn records(n: usize) -> BTreeMap<String, String> {
    (0..n)
        .map(|i| (format!("r{i:05}"), format!("v{i}")))
        .collect()
}

/// (id, field `field` or "DELETED") of `lines`.
pub(crate) fn summary_of(lines: &[Value], field: &str) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            let id = l["id"].as_str().unwrap_or_default().to_owned();
            if l["_deleted"] == Value::Bool(true) {
                (id, "DELETED".to_owned())
            } else {
                (id, l[field].as_str().unwrap_or_default().to_owned())
            }
        })
        .collect()
}

fn summary(lines: &[Value]) -> Vec<(String, String)> {
    summary_of(lines, "t")
}

/// `weir run` started, to be killed once `enough` of its state is
/// committed; what it indexed and committed by then.
pub(crate) fn kill_once_committed(sync: &Sync, enough: usize) -> (Vec<Value>, usize) {
    let log = sync.path("killed.log");
    let config = sync.path("run.toml");
    let mut run = Proc::start(
        "weir run",
        Path::new(WEIR),
        &["run", "--no-progress", config.to_str().expect("path")],
        &[],
        &log,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while sync.committed() < enough {
        let log = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            std::time::Instant::now() < deadline,
            "no state committed: {}",
            log()
        );
        assert!(
            matches!(run.child.try_wait(), Ok(None)),
            "the run ended before it was killed: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    run.kill_hard();
    (sync.indexed(), sync.committed())
}

#[test]
fn a_second_sync_sends_exactly_what_changed_and_deletes_what_is_gone() {
    let sync = Sync::new(FILES, "");
    let mut source = records(50);
    sync.write(&source);
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), 50, "the first sync sends everything");
    assert_eq!(sync.committed(), 50);

    source.insert("r00007".into(), "changed".into());
    source.insert("r99999".into(), "added".into());
    source.remove("r00020");
    sync.write(&source);
    assert_eq!(sync.run(&[]), 0);
    let second = summary(&sync.indexed()[50..]);
    let expected: BTreeSet<(String, String)> = [
        ("r00007", "changed"),
        ("r99999", "added"),
        ("r00020", "DELETED"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(second.iter().cloned().collect::<BTreeSet<_>>(), expected);
    assert_eq!(
        second.last().map(|s| s.1.as_str()),
        Some("DELETED"),
        "deletes come after the listing"
    );
    assert_eq!(sync.committed(), 50);

    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), 53, "nothing changed: nothing sent");

    // A full sync sends every record again, and its sweep leaves the file
    // holding exactly the source: the lines of earlier runs are gone.
    assert_eq!(sync.run(&["--full"]), 0);
    let full = summary(&sync.indexed());
    assert_eq!(full.len(), 50, "a full sync sends every record again");
    assert!(full.iter().all(|(_, t)| t != "DELETED"));
    let ids: BTreeSet<String> = sync
        .indexed()
        .iter()
        .map(|l| l["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(ids.len(), 50, "one line per record after the sweep");
}

#[test]
fn kill_minus_nine_mid_sync_loses_nothing_and_the_next_run_finishes_the_work() {
    // About 2 ms per document on each of 2 workers: a few seconds in all.
    let sync = Sync::new(FILES, SLOW);
    let source = records(3000);
    sync.write(&source);
    let (first, kept) = kill_once_committed(&sync, 100);
    assert!(
        first.len() < 3000,
        "killed mid-sync ({} indexed)",
        first.len()
    );
    assert!(
        kept <= first.len(),
        "state ({kept}) never runs ahead of what was indexed ({})",
        first.len()
    );
    // The killed run did not end cleanly, so the next one is a full sync:
    // every record sent again, and its sweep leaves the file holding each
    // record once, nothing deleted.
    assert_eq!(sync.run(&[]), 0);
    let after = summary(&sync.indexed());
    assert!(
        after.iter().all(|(_, t)| t != "DELETED"),
        "nothing deleted wrongly"
    );
    let ids: BTreeSet<&String> = after.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 3000, "every record indexed");
    assert_eq!(sync.indexed().len(), 3000, "each once, after the sweep");
    assert_eq!(sync.committed(), 3000);
    let before = sync.indexed().len();
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), before, "then nothing is left to send");
}

#[test]
fn in_kafka_mode_the_state_lives_on_a_compacted_topic_any_runner_resumes_from() {
    let settings = format!(
        // One pair: one indexer appending to the file.
        "[worker]\nthreads = 1\n[kafka]\nbootstrap_servers = {:?}\ntopic_partitions = 2",
        weir_tests::kafka_bootstrap()
    );
    let sync = Sync::with(FILES, "", &settings);
    let mut source = records(200);
    sync.write(&source);
    let mut pairs = sync.serve("worker-indexer");
    assert_eq!(sync.run(&["--mode", "kafka"]), 0);
    assert_eq!(sync.indexed().len(), 200);
    assert!(
        !sync.path("weir-state.sqlite").exists(),
        "no local state in Kafka mode"
    );
    source.insert("r00003".into(), "changed".into());
    source.insert("r77777".into(), "added".into());
    source.remove("r00150");
    sync.write(&source);
    // Another runner process, with nothing local: the topic has the state.
    assert_eq!(sync.run(&["--mode", "kafka"]), 0);
    let second: BTreeSet<(String, String)> = summary(&sync.indexed()[200..]).into_iter().collect();
    let expected: BTreeSet<(String, String)> = [
        ("r00003", "changed"),
        ("r77777", "added"),
        ("r00150", "DELETED"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(second, expected);
    assert_eq!(sync.indexed().len(), 203);
    assert!(pairs.stop(), "the worker-indexer stops cleanly");
}

/// A run of the incremental file connector into `csv-indexer` with `columns`.
fn csv_sync(dir: &Path, columns: &str) -> i32 {
    let config = with_plugins(&format!(
        r#"
        [[connectors]]
        name = "source"
        pipeline = "p"
        plugin = {FILES}
        [[pipelines]]
        name = "p"
        [indexer]
        plugin = {{ path = @csv-indexer, config = {{ path = "/out/out.csv", columns = {columns}, truncate_at_start = true }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
        "#
    ));
    std::fs::write(dir.join("csv.toml"), config).expect("config");
    let status = std::process::Command::new(WEIR)
        .args(["run", "--no-progress"])
        .arg(dir.join("csv.toml"))
        .status()
        .expect("weir starts");
    status.code().unwrap_or(-1)
}

#[test]
fn an_indexer_that_cannot_delete_fails_the_marker_and_one_that_can_takes_it() {
    let sync = Sync::new(FILES, "");
    let dir = sync.path("");
    sync.write(&records(3));
    assert_eq!(csv_sync(&dir, r#"["id", "t"]"#), 0);
    sync.write(&records(2));
    // r00002 is gone; a CSV file without a `_deleted` column cannot say so.
    assert_eq!(
        csv_sync(&dir, r#"["id", "t"]"#),
        3,
        "partial success: the marker failed"
    );
    let letters = std::fs::read_dir(dir.join("dead-letters"))
        .expect("dead letters")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        letters.contains("r00002") && letters.contains("does not delete"),
        "{letters}"
    );
    // The failed marker counts as done: its key is removed, so it is not
    // sent again (it is in the dead letters).
    assert_eq!(csv_sync(&dir, r#"["id", "t", "_deleted"]"#), 0);
    std::fs::write(sync.path("data/in.jsonl"), "").expect("empty source");
    assert_eq!(csv_sync(&dir, r#"["id", "t", "_deleted"]"#), 0);
    let csv = std::fs::read_to_string(sync.path("out/out.csv")).expect("csv");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("r00000,") && l.ends_with(",true")),
        "{csv}"
    );
}
