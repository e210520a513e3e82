//! Incremental sync through the `weir` binary: a connector's state kept
//! between runs (committed only when its documents are done), deletion
//! markers to the indexer, `--full`, and kill -9 in the middle of a sync.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use weir_tests::{Proc, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// A folder with `data/in.jsonl`, an output folder and a config reading the
/// file incrementally into an appending JSONL file, through `stages`.
struct Sync {
    dir: tempfile::TempDir,
}

impl Sync {
    fn new(stages: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["data", "out"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
        }
        let config = with_plugins(&format!(
            r#"
            [worker]
            threads = 2
            [[connectors]]
            name = "files"
            pipeline = "p"
            plugin = {{ path = @file-connector, config = {{ paths = ["/data/in.jsonl"], incremental = true }}, grants = {{ dirs = [{{ host = "data", guest = "/data" }}] }} }}
            [[pipelines]]
            name = "p"
            stages = [{stages}]
            [indexer]
            batch_size = 50
            plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/out.jsonl", append = true }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
            "#
        ));
        std::fs::write(dir.path().join("run.toml"), config).expect("config");
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
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

    /// `weir run` to its end; its exit code.
    fn run(&self, extra: &[&str]) -> i32 {
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
    fn indexed(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Rows of committed state.
    fn committed(&self) -> usize {
        let Ok(db) = rusqlite::Connection::open(self.path("weir-state.sqlite")) else {
            return 0;
        };
        db.query_row("SELECT count(*) FROM connector_state", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_or(0, |n| usize::try_from(n).unwrap_or(0))
    }
}

fn records(n: usize) -> BTreeMap<String, String> {
    (0..n).map(|i| (format!("r{i:05}"), format!("v{i}"))).collect()
}

/// (id, text or "DELETED") of `lines`.
fn summary(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            let id = l["id"].as_str().unwrap_or_default().to_owned();
            if l["_deleted"] == Value::Bool(true) {
                (id, "DELETED".to_owned())
            } else {
                (id, l["t"].as_str().unwrap_or_default().to_owned())
            }
        })
        .collect()
}

#[test]
fn a_second_sync_sends_exactly_what_changed_and_deletes_what_is_gone() {
    let sync = Sync::new("");
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
    assert_eq!(second.last().map(|s| s.1.as_str()), Some("DELETED"), "deletes come after the listing");
    assert_eq!(sync.committed(), 50);

    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), 53, "nothing changed: nothing sent");

    assert_eq!(sync.run(&["--full"]), 0);
    let full = summary(&sync.indexed()[53..]);
    assert_eq!(full.len(), 50, "a full sync sends every record again");
    assert!(full.iter().all(|(_, t)| t != "DELETED"));
}

#[test]
fn kill_minus_nine_mid_sync_loses_nothing_and_the_next_run_finishes_the_work() {
    // About 2 ms per document on each of 2 workers: a few seconds in all.
    let sync = Sync::new(r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 2000 } } }"#);
    let source = records(3000);
    sync.write(&source);
    // The state of a run where one record is gone since: it must not be
    // deleted wrongly by a run cut short.
    let log = sync.path("run1.log");
    let config = sync.path("run.toml");
    let mut run = Proc::start(
        "weir run",
        Path::new(WEIR),
        &["run", "--no-progress", config.to_str().expect("path")],
        &[],
        &log,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while sync.committed() < 100 {
        assert!(std::time::Instant::now() < deadline, "no state committed: {}", std::fs::read_to_string(&log).unwrap_or_default());
        assert!(matches!(run.child.try_wait(), Ok(None)), "the run ended before it was killed");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.kill_hard();
    let first = sync.indexed();
    let kept = sync.committed();
    assert!(first.len() < 3000, "killed mid-sync ({} indexed)", first.len());
    assert!(kept <= first.len(), "state ({kept}) never runs ahead of what was indexed ({})", first.len());
    let first_ids: BTreeSet<String> = summary(&first).into_iter().map(|(id, _)| id).collect();

    assert_eq!(sync.run(&[]), 0);
    let second = summary(&sync.indexed()[first.len()..]);
    assert!(second.iter().all(|(_, t)| t != "DELETED"), "nothing deleted wrongly");
    assert!(second.len() < 3000, "the committed work is not sent again ({} sent)", second.len());
    let all: BTreeSet<String> = first_ids
        .iter()
        .cloned()
        .chain(second.iter().map(|(id, _)| id.clone()))
        .collect();
    assert_eq!(all.len(), 3000, "every record indexed by one run or the other");
    // Every record not committed by the killed run was sent again.
    assert!(second.len() >= 3000 - kept, "{} sent, {kept} kept", second.len());
    assert_eq!(sync.committed(), 3000);
    let before = sync.indexed().len();
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), before, "then nothing is left to send");
}
