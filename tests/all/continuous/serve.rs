//! Under `weir serve` a continuous run is a service: its process killed
//! (kill -9) is started again under the same run id after a backoff that
//! doubles, losing nothing (the documents in flight are sent again:
//! duplicates, counted), its counts going on; a stop through the API is no
//! death, and pause and resume reach whichever process it has.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_tests::{Proc, plugins_dir};

use super::{LONG, WEIR, children, contiguous, cursor_in, kill_9};
use crate::operations::{logged_address, request};

const TOKEN: &str = "acme-continuous-0123456789";

/// A `weir serve` whose tenant `acme` may run the test connector into the
/// test indexer, recording into `out/`.
struct Plane {
    dir: tempfile::TempDir,
    proc: Proc,
    url: String,
}

impl Plane {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).expect("out dir");
        let operator = format!(
            r#"
[server]
addr = "127.0.0.1:0"
data_dir = "data"
plugin_dir = {plugins:?}

[[tenants]]
name = "acme"
token_env = "TEST_ACME_TOKEN"
pipelines = ["live"]
plugins = ["test_connector.wasm", "test_indexer.wasm"]
dirs = [{out:?}]
max_concurrent_runs = 1
"#,
            plugins = plugins_dir().display().to_string(),
            out = out.display().to_string(),
        );
        let path = dir.path().join("operator.toml");
        std::fs::write(&path, operator).expect("operator file");
        let log = dir.path().join("serve.log");
        let mut proc = Proc::start(
            "weir serve",
            Path::new(WEIR),
            &["serve", path.to_str().expect("utf-8")],
            &[
                ("TEST_ACME_TOKEN", TOKEN.to_owned()),
                ("RUST_LOG", "weir=info".to_owned()),
            ],
            &log,
        );
        assert!(
            proc.wait_for_log(&log, "status page on http://", 1, LONG),
            "weir serve did not start:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let text = std::fs::read_to_string(&log).expect("log");
        let url = format!("http://{}", logged_address(&text, "status page on http://"));
        Self { dir, proc, url }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn call(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        request(method, &format!("{}{path}", self.url), Some(TOKEN), body)
    }

    /// Submit the continuous run; its id.
    fn submit(&self) -> String {
        let config = format!(
            r#"
[runner]
grace_period = "60s"
report_every = "1s"
[indexer]
batch_size = 50
batch_timeout = "20ms"
plugin = {{ path = "test_indexer.wasm", config = {{ record = "/out/indexed.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
[[connectors]]
name = "source"
pipeline = "live"
continuous = true
plugin = {{ path = "test_connector.wasm", config = {{ forever = true, rate = 500.0 }} }}
[[pipelines]]
name = "live"
"#,
            out = self.out().display().to_string(),
        );
        let (status, run) = self.call("POST", "/api/runs", &config);
        assert_eq!(status, 201, "{run}\n{}", self.log());
        run["id"].as_str().expect("id").to_owned()
    }

    fn run(&self, id: &str) -> Value {
        let (status, run) = self.call("GET", &format!("/api/runs/{id}"), "");
        assert_eq!(status, 200, "{run}");
        run
    }

    /// Wait until run `id` satisfies `ok`; the run as it then was.
    fn until(&self, id: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + LONG;
        loop {
            let run = self.run(id);
            if ok(&run) {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} never {what}: {run}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The numbers of the documents indexed so far.
    fn indexed(&self) -> Vec<u64> {
        let text = std::fs::read_to_string(self.out().join("indexed.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|record| record["n"].as_u64())
            .collect()
    }

    fn wait_indexed(&self, count: usize) {
        let deadline = Instant::now() + LONG;
        while self.indexed().len() < count {
            assert!(
                Instant::now() < deadline,
                "{count} documents were not indexed:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's one `weir serve-run` process, once there is one that
    /// is not `not`.
    fn run_process(&self, not: Option<u32>) -> u32 {
        let deadline = Instant::now() + LONG;
        loop {
            let found = run_processes(self.proc.child.id());
            if let [one] = found.as_slice()
                && Some(*one) != not
            {
                return *one;
            }
            assert!(
                Instant::now() < deadline,
                "no new run process: {found:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The `weir serve-run` processes whose parent is `server`.
fn run_processes(server: u32) -> Vec<u32> {
    children(server, "serve-run")
}

fn restarts(run: &Value) -> u64 {
    run["service"]["restarts"].as_u64().unwrap_or(0)
}

#[test]
fn a_continuous_runs_killed_process_starts_again_with_a_backoff_and_loses_nothing() {
    let plane = Plane::start();
    let id = plane.submit();
    plane.wait_indexed(300);
    let first = plane.run_process(None);
    let counted = plane.run(&id)["counts"]["indexed"].as_u64().unwrap_or(0);
    kill_9(first);
    let run = plane.until(&id, "restarted once", |run| restarts(run) == 1);
    let exit = run["service"]["last_exit"].as_str().unwrap_or_default();
    assert!(exit.contains("signal 9"), "{run}");
    assert!(
        ["restarting", "running"].contains(&run["status"].as_str().unwrap_or_default()),
        "{run}"
    );
    // A new process, under the same run id, goes on from the state.
    let second = plane.run_process(Some(first));
    let at_kill = plane.indexed().len();
    plane.wait_indexed(at_kill + 300);
    let run = plane.until(&id, "running again", |run| run["status"] == "running");
    assert!(
        run["counts"]["indexed"].as_u64().unwrap_or(0) >= counted,
        "its counts go on from the last process's: {run}"
    );
    // Paused and resumed: the new process hears it.
    let (status, paused) = plane.call("POST", &format!("/api/runs/{id}/pause"), "");
    assert_eq!(
        (status, paused["status"].as_str()),
        (200, Some("paused")),
        "{paused}"
    );
    let (status, resumed) = plane.call("POST", &format!("/api/runs/{id}/resume"), "");
    assert_eq!(
        (status, resumed["status"].as_str()),
        (200, Some("running")),
        "{resumed}"
    );

    // Killed again soon after: the wait doubles.
    kill_9(second);
    plane.until(&id, "restarted twice", |run| restarts(run) == 2);
    let third = plane.run_process(Some(second));
    let at_kill = plane.indexed().len();
    plane.wait_indexed(at_kill + 100);
    let log = plane.log();
    assert!(
        log.contains("backoff=1s") && log.contains("backoff=2s"),
        "waits of 1 s then 2 s:\n{log}"
    );

    // Stopped through the API: it ends, and is not started again.
    let (status, stopping) = plane.call("POST", &format!("/api/runs/{id}/stop"), "");
    assert_eq!(status, 200, "{stopping}");
    let ended = plane.until(&id, "ended", |run| {
        !["running", "paused", "stopping", "restarting"]
            .contains(&run["status"].as_str().unwrap_or_default())
    });
    assert_eq!(ended["status"], "interrupted", "{ended}");
    assert!(
        run_processes(plane.proc.child.id()).is_empty(),
        "no process after the stop (the last was {third})"
    );
    // Nothing lost: every document before the cursor its state keeps is
    // indexed; the ones in flight at each kill were sent again (duplicates).
    let (status, state) = plane.call("GET", &format!("/api/runs/{id}/state"), "");
    assert_eq!(status, 200, "{state}");
    let cursor = cursor_in(&state).unwrap_or_else(|| panic!("no cursor kept: {state}"));
    let indexed = plane.indexed();
    let done: Vec<u64> = indexed.iter().copied().filter(|&n| n < cursor).collect();
    let last = contiguous(&done, 0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(last + 1, cursor, "every document before the cursor indexed");
    let distinct: BTreeSet<u64> = indexed.iter().copied().collect();
    eprintln!(
        "indexed doc-0 to doc-{last}: {} records, {} duplicates over 2 kills",
        indexed.len(),
        indexed.len() - distinct.len()
    );
}

#[test]
fn a_continuous_run_stopped_through_the_api_is_not_started_again() {
    let plane = Plane::start();
    let id = plane.submit();
    plane.wait_indexed(100);
    let process = plane.run_process(None);
    let (status, stopping) = plane.call("POST", &format!("/api/runs/{id}/stop"), "");
    assert_eq!(status, 200, "{stopping}");
    let ended = plane.until(&id, "ended", |run| {
        !["running", "paused", "stopping", "restarting"]
            .contains(&run["status"].as_str().unwrap_or_default())
    });
    assert_eq!(ended["status"], "interrupted", "{ended}");
    assert!(ended.get("service").is_none(), "{ended}");
    let left = run_processes(plane.proc.child.id());
    assert!(left.is_empty(), "{process} ended and none began: {left:?}");
    assert!(
        !plane.log().contains("starts again after its backoff"),
        "{}",
        plane.log()
    );
    let indexed = plane.indexed();
    contiguous(&indexed, 0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ended["counts"]["indexed"].as_u64(),
        Some(indexed.len() as u64),
        "a drained stop: every document published was indexed, once"
    );
}

#[test]
fn a_paused_continuous_run_whose_process_dies_starts_again_paused() {
    let mut plane = Plane::start();
    let id = plane.submit();
    plane.wait_indexed(100);
    let first = plane.run_process(None);
    let (status, paused) = plane.call("POST", &format!("/api/runs/{id}/pause"), "");
    assert_eq!(
        (status, paused["status"].as_str()),
        (200, Some("paused")),
        "{paused}"
    );
    kill_9(first);
    plane.until(&id, "restarted", |run| restarts(run) == 1);
    plane.run_process(Some(first));
    // Its new process is told it is paused: the run says so once it runs.
    let run = plane.until(&id, "paused again", |run| {
        run["status"] == "paused" && run["service"]["next_start_ms"].is_null()
    });
    assert_eq!(restarts(&run), 1, "{run}");
    // Each process said it was paused: the first when asked, the new one
    // as it started.
    let log = plane.dir.path().join("serve.log");
    assert!(
        plane
            .proc
            .wait_for_log(&log, "paused: nothing new is published", 2, LONG),
        "{}",
        plane.log()
    );
    let (status, resumed) = plane.call("POST", &format!("/api/runs/{id}/resume"), "");
    assert_eq!(
        (status, resumed["status"].as_str()),
        (200, Some("running")),
        "{resumed}"
    );
    let at = plane.indexed().len();
    plane.wait_indexed(at + 100);
    let (status, _) = plane.call("POST", &format!("/api/runs/{id}/stop"), "");
    assert_eq!(status, 200);
    let ended = plane.until(&id, "ended", |run| {
        !["running", "paused", "stopping", "restarting"]
            .contains(&run["status"].as_str().unwrap_or_default())
    });
    assert_eq!(ended["status"], "interrupted", "{ended}");
    contiguous(&plane.indexed(), 0).unwrap_or_else(|e| panic!("{e}"));
}
