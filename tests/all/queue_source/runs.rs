//! The queue source through the `weir` binary with the queue-connector:
//! messages become documents, failures are retried then dead-lettered on
//! the broker, invalid messages at once; a run killed with SIGKILL
//! mid-queue loses nothing (the next run indexes the rest, duplicates
//! counted) and leaves nothing hung on the queue.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir_tests::{Proc, with_plugins};

use super::{Amqp, PATIENCE, eventually, unique};
use weir::source::queue::{ATTEMPTS, ERROR};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// A run of the queue-connector on `queue` in a folder of its own.
struct Run {
    dir: tempfile::TempDir,
    config: PathBuf,
    /// The broker's URL, given to the run as `QUEUE_URL` (the `@` of its
    /// credentials would read as a plugin in the config's text).
    url: String,
}

impl Run {
    /// `grant` and `stages` are TOML (inline-table entries, array items).
    fn new(url: &str, queue: &str, grant: &str, stages: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("out")).expect("out");
        let toml = format!(
            r#"
            [runner]
            cache_dir = {cache:?}
            grace_period = "60s"
            [worker]
            threads = 2
            [indexer]
            batch_size = 100
            batch_timeout = "20ms"
            plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/docs.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
            [dead_letters]
            path = "dead.jsonl"
            [[connectors]]
            name = "queue"
            pipeline = "p"
            plugin = {{ path = @queue-connector, config = {{ source = "orders", wait_ms = 200 }}, grants = {{ queues = {{ orders = {{ url = "${{QUEUE_URL}}", queue = {queue:?} {grant} }} }} }} }}
            [[pipelines]]
            name = "p"
            stages = [{stages}]
            "#,
            cache = dir.path().join("cache").display().to_string(),
            out = dir.path().join("out").display().to_string(),
        );
        let config = dir.path().join("config.toml");
        std::fs::write(&config, with_plugins(&toml)).expect("config");
        Self {
            dir,
            config,
            url: url.to_owned(),
        }
    }

    fn start(&self, name: &str) -> Proc {
        Proc::start(
            name,
            Path::new(WEIR),
            &["run", "--no-progress", self.config.to_str().expect("utf-8")],
            &[("RUST_LOG", "info".into()), ("QUEUE_URL", self.url.clone())],
            &self.dir.path().join(format!("{name}.log")),
        )
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// The ids of the documents indexed so far (lines cut by a kill apart).
    fn indexed(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("out/docs.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|d| d["id"].as_str().map(str::to_owned))
            .collect()
    }

    /// Wait until `done` holds while `run` goes on.
    fn wait(&self, run: &mut Proc, name: &str, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + PATIENCE * 2;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "{what}: not in time:\n{}",
                self.log(name)
            );
            assert!(
                matches!(run.child.try_wait(), Ok(None)),
                "{what}: the run ended first:\n{}",
                self.log(name)
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// SIGTERM, then the exit code (130: interrupted, what was done committed).
fn interrupt(run: &mut Proc) -> Option<i32> {
    let pid = run.child.id().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    run.child.wait().expect("wait").code()
}

fn json_bodies(from: usize, to: usize, action: &str) -> Vec<String> {
    (from..to)
        .map(|i| format!(r#"{{"id":"m-{i}","n":{i},"action":"{action}"}}"#))
        .collect()
}

/// Through `weir run`: good messages indexed and acknowledged; one whose
/// document fails every time retried up to `max_attempts`, then on the
/// dead-letter queue with the error; bodies that are no document there at
/// once (attempt 1) and in the run's dead letters.
#[test]
fn a_weir_run_indexes_retries_and_dead_letters_on_the_broker() {
    let amqp = Amqp::test_broker();
    let queue = unique("run");
    amqp.declare(&queue);
    amqp.publish(&queue, &json_bodies(0, 300, "ok"));
    amqp.publish(&queue, &["not json".to_owned(), "[1, 2]".to_owned()]);
    amqp.publish(&queue, &json_bodies(300, 301, "fail"));
    let run = Run::new(
        &amqp.url,
        &queue,
        r#", max_attempts = 3, backoff = "100ms""#,
        r#"{ name = "hostile", plugin = { path = @hostile-stage } }"#,
    );
    let mut weir = run.start("run");
    let dlq = format!("{queue}.dead-letters");
    let mut dead = Vec::new();
    run.wait(
        &mut weir,
        "run",
        "300 indexed and 3 dead letters on the broker",
        |r| r.indexed().len() >= 300 && amqp.counts(&dlq).0 >= 3,
    );
    dead.extend(amqp.drain(&dlq));
    let by_error: HashMap<&str, &str> = dead
        .iter()
        .map(|d| (d.headers[ERROR].as_str(), d.headers[ATTEMPTS].as_str()))
        .collect();
    assert_eq!(dead.len(), 3, "{by_error:?}");
    let failed: Vec<(&&str, &&str)> = by_error
        .iter()
        .filter(|(e, _)| e.contains("asked to fail"))
        .collect();
    assert_eq!(failed.len(), 1, "{by_error:?}");
    assert_eq!(*failed[0].1, "3", "retried up to max_attempts");
    let invalid = by_error
        .iter()
        .filter(|(e, _)| e.contains("not a JSON object"))
        .count();
    assert_eq!(invalid, 2, "{by_error:?}");
    assert!(
        by_error
            .iter()
            .filter(|(e, _)| e.contains("JSON"))
            .all(|(_, a)| *a == "1")
    );
    assert!(
        eventually(|| amqp.counts(&queue).0 == 0),
        "nothing left on the queue"
    );
    assert_eq!(
        interrupt(&mut weir),
        Some(130),
        "SIGTERM drains:\n{}",
        run.log("run")
    );
    assert!(eventually(|| amqp.counts(&queue) == (0, 0)));
    let mut ids = run.indexed();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 300);
    amqp.delete(&queue);
    amqp.delete(&dlq);
}

/// Held-out trial: the weir process killed with SIGKILL mid-queue; the
/// broker gives what it had not acknowledged to the next run: 0 lost, 0
/// hung, duplicates counted.
#[test]
fn a_weir_run_killed_mid_queue_loses_nothing() {
    let amqp = Amqp::test_broker();
    let queue = unique("kill");
    amqp.declare(&queue);
    let n = 5_000;
    amqp.publish(&queue, &json_bodies(0, n, "ok"));
    let slow =
        r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 150 } } }"#;
    let run = Run::new(&amqp.url, &queue, "", slow);
    let mut first = run.start("first");
    run.wait(&mut first, "first", "a third indexed", |r| {
        r.indexed().len() >= n / 3
    });
    first.kill_hard();
    let before = run.indexed().len();
    // The broker returns what the killed run held.
    assert!(
        eventually(|| amqp.counts(&queue).1 == 0),
        "the dead run's consumers are gone"
    );
    let mut second = run.start("second");
    run.wait(&mut second, "second", "every message indexed", |r| {
        let mut ids = r.indexed();
        ids.sort();
        ids.dedup();
        ids.len() >= n
    });
    assert!(
        eventually(|| amqp.counts(&queue).0 == 0),
        "0 hung: nothing left ready"
    );
    assert_eq!(interrupt(&mut second), Some(130), "{}", run.log("second"));
    assert!(
        eventually(|| amqp.counts(&queue) == (0, 0)),
        "0 hung: nothing unacknowledged"
    );
    let all = run.indexed();
    let mut ids = all.clone();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "0 lost");
    eprintln!(
        "weir kill -9 mid-queue: {n} messages, {before} indexed before the kill, {} duplicates after the rerun",
        all.len() - n
    );
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}

/// A paused run (SIGUSR1) closes its queue's consumers however long it
/// stays paused: what is published meanwhile waits on the broker, ready
/// for other consumers; resumed (SIGUSR2), the run takes and indexes it,
/// each message once.
#[test]
fn a_paused_run_leaves_its_queue_to_the_broker_until_resumed() {
    let amqp = Amqp::test_broker();
    let queue = unique("paused");
    amqp.declare(&queue);
    amqp.publish(&queue, &json_bodies(0, 100, "ok"));
    let run = Run::new(&amqp.url, &queue, ", concurrency = 2", "");
    let mut proc = run.start("paused");
    run.wait(&mut proc, "paused", "the first 100 indexed", |r| {
        r.indexed().len() >= 100
    });
    assert_eq!(amqp.counts(&queue).1, 2, "two consumers while running");
    proc.signal("USR1");
    assert!(
        eventually(|| amqp.counts(&queue).1 == 0),
        "the pause closed the consumers:\n{}",
        run.log("paused")
    );
    amqp.publish(&queue, &json_bodies(100, 200, "ok"));
    assert_eq!(
        amqp.counts(&queue),
        (100, 0),
        "published during the pause: ready on the broker, no consumer"
    );
    assert_eq!(run.indexed().len(), 100, "nothing taken while paused");
    proc.signal("USR2");
    run.wait(
        &mut proc,
        "paused",
        "all 200 indexed after the resume",
        |r| r.indexed().len() >= 200,
    );
    assert_eq!(interrupt(&mut proc), Some(130), "{}", run.log("paused"));
    // Ids are message ids, which each publish numbers from 0: the bodies'
    // `n` tell the messages apart.
    let ns: Vec<i64> = std::fs::read_to_string(run.dir.path().join("out/docs.jsonl"))
        .expect("output")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|d| d["n"].as_i64())
        .collect();
    let distinct: std::collections::HashSet<&i64> = ns.iter().collect();
    assert_eq!((ns.len(), distinct.len()), (200, 200), "each message once");
    assert_eq!(amqp.counts(&queue), (0, 0), "nothing left on the queue");
    amqp.delete(&queue);
}
