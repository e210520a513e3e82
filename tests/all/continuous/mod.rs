//! Continuous runs: a connector that never ends (`continuous = true`).
//! `weir run` goes until a signal drains it (nothing lost, its state
//! committed) or a second one stops it at once, logging a report line each
//! period, and holds what is in flight, not what it has done
//! (`signals.rs`, `bounded.rs`); the same in Kafka mode (`kafka.rs`); under
//! `weir serve` its process that dies is started again with a backoff,
//! while a stop through the API is no death (`serve.rs`).

mod bounded;
mod fleet;
mod kafka;
mod serve;
mod signals;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_tests::{Proc, with_plugins};

pub(super) const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// Generous: plugins compile on a cold cache, and the machine is loaded.
pub(super) const LONG: Duration = Duration::from_secs(600);

/// A config whose test connector publishes `doc-<n>` for ever from the
/// cursor its state keeps, into a test indexer recording each document.
pub(super) struct Forever {
    pub(super) dir: tempfile::TempDir,
    pub(super) config: PathBuf,
    /// Its pipeline, named for this test alone (Kafka's topics are shared).
    pub(super) pipeline: String,
}

impl Forever {
    /// `settings` go first (e.g. `[runner]`, `[kafka]`), `connector` into
    /// the connector's config, `indexer` into the indexer's, `table` into
    /// `[indexer]`.
    pub(super) fn new(settings: &str, connector: &str, indexer: &str, table: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("out")).expect("out dir");
        let pipeline = format!("live_{:08x}", fastrand::u32(..));
        // Kafka mode keeps state on a topic of the pipeline's.
        let state = if settings.contains("[kafka]") {
            String::new()
        } else {
            format!(
                "[state]\npath = {:?}",
                dir.path().join("state.sqlite").display().to_string()
            )
        };
        let toml = format!(
            r#"
            {settings}
            {state}
            [indexer]
            batch_size = 100
            batch_timeout = "20ms"
            {table}
            plugin = {{ path = @test-indexer, config = {{ record = "/out/indexed.jsonl", {indexer} }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
            [[connectors]]
            name = "source"
            pipeline = "{pipeline}"
            continuous = true
            plugin = {{ path = @test-connector, config = {{ forever = true, {connector} }} }}
            [[pipelines]]
            name = "{pipeline}"
            "#,
            out = dir.path().join("out").display().to_string(),
        );
        let config = dir.path().join("forever.toml");
        std::fs::write(&config, with_plugins(&toml)).expect("config");
        Self {
            dir,
            config,
            pipeline,
        }
    }

    pub(super) fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    pub(super) fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    /// `weir <args> <config>`, logging to `<name>.log`.
    pub(super) fn start(&self, name: &str, args: &[&str]) -> Proc {
        let mut all = args.to_vec();
        all.push(self.config.to_str().expect("utf-8"));
        Proc::start(
            name,
            Path::new(WEIR),
            &all,
            &[("RUST_LOG", "weir=info".to_owned())],
            &self.log_path(name),
        )
    }

    /// `weir <role> <config> <pipeline>` (a serving process of Kafka mode).
    pub(super) fn serve(&self, name: &str, role: &str) -> Proc {
        Proc::start(
            name,
            Path::new(WEIR),
            &[role, self.config.to_str().expect("utf-8"), &self.pipeline],
            &[("RUST_LOG", "weir=info".to_owned())],
            &self.log_path(name),
        )
    }

    /// `weir run` of the config: in Kafka mode when it has a `[kafka]`
    /// section (its workers and indexers are processes of their own).
    pub(super) fn run(&self, name: &str) -> Proc {
        let kafka = std::fs::read_to_string(&self.config).is_ok_and(|t| t.contains("[kafka]"));
        if kafka {
            self.start(name, &["run", "--no-progress", "--mode", "kafka"])
        } else {
            self.start(name, &["run", "--no-progress"])
        }
    }

    /// The numbers of the documents indexed so far, in the order recorded.
    pub(super) fn indexed(&self) -> Vec<u64> {
        let text = std::fs::read_to_string(self.dir.path().join("out").join("indexed.jsonl"))
            .unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|record| record["n"].as_u64())
            .collect()
    }

    /// Wait until at least `count` documents are indexed (or `proc` ends).
    pub(super) fn wait_indexed(&self, proc: &mut Proc, name: &str, count: usize) {
        let deadline = Instant::now() + LONG;
        while self.indexed().len() < count {
            assert!(
                matches!(proc.child.try_wait(), Ok(None)),
                "{name} ended early:\n{}",
                self.log(name)
            );
            assert!(
                Instant::now() < deadline,
                "{count} documents were not indexed:\n{}",
                self.log(name)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Send `signal` to `proc`.
pub(super) fn signal(proc: &Proc, signal: i32) {
    let pid = i32::try_from(proc.child.id()).expect("pid");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "signal sent");
}

/// Wait for `proc` to end, within `within`.
pub(super) fn ended_within(proc: &mut Proc, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = proc.child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Connector `name`'s row of a `weir run` summary: its counts by column
/// (published, children, succeeded, failed, dropped, deleted, duplicates).
pub(super) fn summary_row(log: &str, name: &str) -> BTreeMap<&'static str, u64> {
    let row = log
        .lines()
        .rfind(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no summary row for {name}:\n{log}"));
    let columns = [
        "published",
        "children",
        "succeeded",
        "failed",
        "dropped",
        "deleted",
        "duplicates",
    ];
    columns
        .into_iter()
        .zip(row.split_whitespace().skip(2))
        .map(|(column, value)| (column, value.parse().unwrap_or(u64::MAX)))
        .collect()
}

/// Whether `seen` holds every number from `from` to its largest.
pub(super) fn contiguous(seen: &[u64], from: u64) -> Result<u64, String> {
    let distinct: std::collections::BTreeSet<u64> = seen.iter().copied().collect();
    let Some(&last) = distinct.last() else {
        return Err("nothing indexed".into());
    };
    let missing: Vec<u64> = (from..=last)
        .filter(|n| !distinct.contains(n))
        .take(10)
        .collect();
    if missing.is_empty() {
        Ok(last)
    } else {
        Err(format!("lost, among others: {missing:?} (up to {last})"))
    }
}

/// The live processes whose parent is `parent` and whose command line has
/// the argument `command` (`serve-run`, `fleet-pipeline`).
pub(super) fn children(parent: u32, command: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state, then the parent's pid, after the command's `)`.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace())
            .into_iter()
            .flatten();
        let state = fields.next();
        let parent_pid = fields.next().and_then(|p| p.parse::<u32>().ok());
        if parent_pid == Some(parent)
            && !matches!(state, Some("Z" | "X"))
            && cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == command.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// SIGKILL `pid`, a process this test found as its processes' child.
pub(super) fn kill_9(pid: u32) {
    // SAFETY: kill(2) on a pid of this test's own processes' children.
    assert_eq!(
        unsafe { libc::kill(i32::try_from(pid).expect("pid"), libc::SIGKILL) },
        0
    );
}

/// The value of the key `cursor` anywhere in a state answer.
pub(super) fn cursor_in(value: &Value) -> Option<u64> {
    match value {
        Value::Object(map) => {
            if map.get("key").and_then(Value::as_str) == Some("cursor") {
                return map.get("value")?.as_str()?.parse().ok();
            }
            map.values().find_map(cursor_in)
        }
        Value::Array(items) => items.iter().find_map(cursor_in),
        _ => None,
    }
}
