//! Connecting and reconnecting: a source opens at once whatever the broker
//! does, is CONNECTING until it has consumers, retries every second, and
//! reconnects when its connection is lost or the broker is killed (-9),
//! losing nothing.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use weir::core::messages::{Settled, Source};
use weir::source::queue::{QueueSource, QueueState};

use super::{Amqp, PATIENCE, bodies, body_of, eventually, grant, open, unique};

fn script() -> std::path::PathBuf {
    weir_tests::repo_root()
        .join("tests")
        .join("queue")
        .join("rabbitmq.sh")
}

/// A RabbitMQ node of this test's own (port `port`), stopped when dropped.
struct Node {
    port: u16,
}

impl Node {
    fn run(&self, command: &str) -> std::process::Output {
        Command::new("bash")
            .arg(script())
            .arg(command)
            .env("WEIR_AMQP_PORT", self.port.to_string())
            .output()
            .expect("run rabbitmq.sh")
    }

    fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// Kill the node's Erlang VM with SIGKILL.
    fn kill9(&self) {
        let home = std::env::var("WEIR_AMQP_HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| {
                let cache = std::env::var("XDG_CACHE_HOME")
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|_| {
                        std::path::PathBuf::from(std::env::var("HOME").expect("HOME"))
                            .join(".cache")
                    });
                cache.join("weir").join("rabbitmq")
            });
        let pidfile = home.join(format!("node-{}", self.port)).join("node.pid");
        let pid = std::fs::read_to_string(&pidfile).expect("the node's pid file");
        let status = Command::new("kill")
            .arg("-9")
            .arg(pid.trim())
            .status()
            .expect("kill");
        assert!(status.success());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.run("stop");
    }
}

/// "Connecting never blocks the caller: until a worker has a consumer, the
/// trigger is CONNECTING, and the worker retries every second"; "When the
/// connection is lost, workers close their consumers and connect again";
/// and the held-out trial: the broker killed (-9) under a consuming source,
/// 0 lost, 0 hung, duplicates counted.
#[test]
fn connecting_never_blocks_and_a_broker_killed_mid_stream_loses_nothing() {
    let node = Node { port: 19682 };
    node.run("stop");
    let queue = unique("broker-kill");
    let mut g = grant(&node.url(), &queue);
    g.concurrency = 2;
    g.batch_size = 20;
    let opened_at = Instant::now();
    let source = QueueSource::open_named(&g, "orders").expect("opens");
    assert!(
        opened_at.elapsed() < Duration::from_secs(5),
        "opening does not wait for the broker"
    );
    assert_eq!(source.state(), QueueState::Connecting);
    assert!(
        source
            .receive(10, Duration::from_millis(200))
            .expect("no error while connecting")
            .is_empty()
    );
    let started = node.run("start");
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    assert!(
        source.wait_for(QueueState::Running, PATIENCE),
        "connected once the broker came"
    );
    let amqp = Amqp::connect(&node.url());
    let n = 600;
    amqp.publish(&queue, &bodies("k", n));
    drop(amqp);
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut killed = false;
    let deadline = Instant::now() + PATIENCE * 2;
    while seen.len() < n && Instant::now() < deadline {
        let batch = source
            .receive(20, Duration::from_millis(100))
            .expect("receive never fails");
        for d in batch {
            *seen.entry(body_of(&d)).or_default() += 1;
            source.settle(d.token, Settled::Done);
        }
        if !killed && seen.len() >= n / 3 {
            node.kill9();
            killed = true;
            assert!(
                source.wait_for(QueueState::Connecting, PATIENCE),
                "the loss is noticed"
            );
            let restarted = node.run("restart");
            assert!(
                restarted.status.success(),
                "{}",
                String::from_utf8_lossy(&restarted.stderr)
            );
        }
    }
    assert!(killed);
    assert_eq!(seen.len(), n, "0 lost: every message came at least once");
    let duplicates: u32 = seen.values().map(|c| c - 1).sum();
    eprintln!(
        "broker kill -9: {n} messages, {duplicates} delivered twice (acks in flight when it died)"
    );
    assert!(
        source.counts().connects.load(Ordering::Relaxed) >= 2,
        "it reconnected"
    );
    source.close();
    let amqp = Amqp::connect(&node.url());
    assert!(
        eventually(|| amqp.counts(&queue) == (0, 0)),
        "all acknowledged in the end"
    );
}

/// "When the connection is lost, workers close their consumers and connect
/// again": the broker closes the source's connection (as an operator or a
/// network would), and the source consumes again, losing nothing.
#[test]
fn a_lost_connection_is_made_again() {
    let amqp = Amqp::test_broker();
    let queue = unique("lost");
    let g = grant(&amqp.url, &queue);
    let source = open(&g);
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    let connects = source.counts().connects.load(Ordering::Relaxed);
    // The broker closes this source's connection (its name carries the queue).
    let closed = eventually(|| {
        let listed = Command::new("bash")
            .arg(script())
            .args([
                "ctl",
                "list_connections",
                "pid",
                "client_properties",
                "--no-table-headers",
                "-q",
            ])
            .output()
            .expect("list connections");
        let text = String::from_utf8_lossy(&listed.stdout).into_owned();
        let Some(line) = text.lines().find(|l| l.contains(&queue)) else {
            return false;
        };
        let pid = line
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        Command::new("bash")
            .arg(script())
            .args(["ctl", "close_connection", &pid, "closed by the test"])
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(closed, "the broker closed the source's connection");
    assert!(
        eventually(
            || source.counts().connects.load(Ordering::Relaxed) > connects
                && source.state() == QueueState::Running
        ),
        "connected again"
    );
    amqp.publish(&queue, &bodies("after", 5));
    let got = super::take(&source, 5);
    assert_eq!(got.len(), 5);
    for d in &got {
        source.settle(d.token, Settled::Done);
    }
    source.close();
    assert!(eventually(|| amqp.counts(&queue) == (0, 0)));
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}
