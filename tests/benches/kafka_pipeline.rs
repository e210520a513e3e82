//! Kafka and Hybrid modes end to end against raw rdkafka, on the same broker,
//! in one run.
//!
//! - `raw`: one producer writes N ~1 KB messages keyed by id to a 6-partition
//!   topic; a relay consumes them and produces each to a second topic; a sink
//!   consumes those. The time from the first produce to the last consume.
//! - `kafka mode`: the same N documents through `weir run --mode kafka` (the
//!   test connector), one `weir worker` process (2 threads, one copy stage)
//!   and one `weir indexer` process (the test indexer), on 6-partition
//!   topics, started first (they are long-running services) and timed once
//!   they own their partitions. The run's own elapsed time (publish to last
//!   FINISH counted).
//! - `hybrid`: the same, with one `weir worker-indexer` process (2 pairs)
//!   instead of the worker and indexer: no destination topic.
//!
//! `cargo bench -p weir-tests --bench kafka_pipeline` (WEIR_BENCH_DOCS, default
//! 200,000; WEIR_BENCH_ROUNDS, default 3). Starts the test broker (tests/kafka/broker.sh) unless
//! WEIR_KAFKA_BOOTSTRAP names one.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use weir::config::KafkaConfig;
use weir::messenger::kafka::KafkaTopics;
use weir_tests::{Proc, kafka_bootstrap, with_plugins};

const PAD: usize = 800;

fn producer(bootstrap: &str) -> ThreadedProducer<DefaultProducerContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer")
}

fn consumer(bootstrap: &str, group: &str, topic: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .create()
        .expect("consumer");
    c.subscribe(&[topic]).expect("subscribe");
    c
}

/// Delete the topics a round made, so that rounds do not fill the disk.
fn delete_topics(bootstrap: &str, topics: &[&str]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let deleted = futures_executor::block_on(admin.delete_topics(topics, &options));
    if let Err(e) = deleted {
        eprintln!("warning: cannot delete topics {topics:?}: {e}");
    }
}

fn send(p: &ThreadedProducer<DefaultProducerContext>, topic: &str, key: &[u8], payload: &[u8]) {
    let mut record = BaseRecord::to(topic).key(key).payload(payload);
    loop {
        match p.send(record) {
            Ok(()) => return,
            Err((_, back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// produce -> consume+produce -> consume with plain rdkafka.
fn raw(bootstrap: &str, n: usize) -> f64 {
    let tag = format!("{:08x}", fastrand::u32(..));
    let (a, b) = (format!("raw_a_{tag}"), format!("raw_b_{tag}"));
    let topics = KafkaTopics::new(KafkaConfig::new(bootstrap), "raw");
    topics.create_topic(&a, 6).expect("topic");
    topics.create_topic(&b, 6).expect("topic");
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let seconds = std::thread::scope(|s| {
        s.spawn(|| {
            let c = consumer(bootstrap, &format!("relay_{tag}"), &a);
            let p = producer(bootstrap);
            let mut relayed = 0;
            while relayed < n {
                if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
                    send(
                        &p,
                        &b,
                        m.key().unwrap_or_default(),
                        m.payload().unwrap_or_default(),
                    );
                    relayed += 1;
                }
            }
            p.flush(Duration::from_secs(60)).expect("flush");
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let sink = s.spawn(|| {
            let c = consumer(bootstrap, &format!("sink_{tag}"), &b);
            let mut seen = 0;
            while seen < n {
                if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
                    seen += 1;
                }
            }
            start.elapsed().as_secs_f64()
        });
        let p = producer(bootstrap);
        let body = "x".repeat(PAD);
        for i in 0..n {
            let id = format!("doc-{i}");
            let payload = format!(r#"{{"id":"{id}","run_id":"bench","n":{i},"body":"{body}"}}"#);
            send(&p, &a, id.as_bytes(), payload.as_bytes());
        }
        p.flush(Duration::from_secs(60)).expect("flush");
        let seconds = sink.join().expect("sink");
        done.store(true, Ordering::Relaxed);
        seconds
    });
    delete_topics(bootstrap, &[&a, &b]);
    seconds
}

/// Parse the summary line `Run <id>: Success in 12.34s`.
fn run_seconds(summary: &str) -> f64 {
    let line = summary
        .lines()
        .find(|l| l.starts_with("Run "))
        .expect("summary line");
    assert!(
        line.contains("Success"),
        "the run did not succeed: {summary}"
    );
    let time = line.rsplit(" in ").next().expect("time");
    if let Some(ms) = time.strip_suffix("ms") {
        ms.parse::<f64>().expect("ms") / 1000.0
    } else {
        time.trim_end_matches('s').parse().expect("seconds")
    }
}

/// CPU seconds `pid` has used (Linux: user + system time in /proc, at the
/// usual 100 ticks per second).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// How the workers and indexers of a weir round run.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// Kafka mode: a `weir worker` and a `weir indexer` process.
    Kafka,
    /// Hybrid mode: one `weir worker-indexer` process.
    Hybrid,
}

/// A weir round: the run's seconds, and the CPU seconds its worker and
/// indexer processes used during it.
fn weir_mode(bootstrap: &str, n: usize, layout: Layout) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pipeline = format!("bench_{:08x}", fastrand::u32(..));
    let toml = format!(
        r#"
        [runner]
        cache_dir = {cache:?}
        [worker]
        threads = 2
        [kafka]
        bootstrap_servers = {bootstrap:?}
        topic_partitions = 6
        [indexer]
        batch_size = 500
        plugin = {{ path = @test-indexer }}
        [[connectors]]
        name = "bench"
        pipeline = "{pipeline}"
        plugin = {{ path = @test-connector, config = {{ count = {n}, pad = {PAD} }} }}
        [[pipelines]]
        name = "{pipeline}"
        stages = [{{ name = "copy", plugin = {{ path = @copy-fields, config = {{ mappings = [{{ source = "n", target = "m" }}] }} }} }}]
        "#,
        cache = dir.path().join("cache").display().to_string(),
    );
    let config = dir.path().join("bench.toml");
    std::fs::write(&config, with_plugins(&toml)).expect("config");
    let config = config.to_str().expect("utf-8");
    let weir = Path::new(env!("CARGO_BIN_EXE_weir-under-test"));
    let status = Command::new(weir)
        .args(["validate", config])
        .status()
        .expect("validate");
    assert!(status.success());
    let log = |name: &str| dir.path().join(format!("{name}.log"));
    let start = |role: &str| Proc::start(role, weir, &[role, config, &pipeline], &[], &log(role));
    // Workers and indexers are long-running services: time the run once
    // they own their partitions, as the relay and sink of `raw` are.
    let wait = Duration::from_secs(60);
    let mut processes = match layout {
        Layout::Kafka => vec![
            (start("worker"), "worker", 2),
            (start("indexer"), "indexer", 1),
        ],
        Layout::Hybrid => vec![(start("worker-indexer"), "worker-indexer", 2)],
    };
    for (process, role, consumers) in &mut processes {
        assert!(
            process.wait_for_log(&log(role), "partitions assigned", *consumers, wait),
            "{role} did not get its partitions"
        );
    }
    let serving_cpu = |processes: &[(Proc, &str, usize)]| -> f64 {
        processes
            .iter()
            .map(|(p, ..)| cpu_seconds(p.child.id()))
            .sum()
    };
    let cpu_before = serving_cpu(&processes);
    let out = Command::new(weir)
        .args(["run", "--mode", "kafka", "--no-progress", config])
        .output()
        .expect("run");
    let cpu = serving_cpu(&processes) - cpu_before;
    let summary = String::from_utf8_lossy(&out.stdout);
    let seconds = run_seconds(&summary);
    for (process, role, _) in &mut processes {
        assert!(process.stop(), "{role} did not stop cleanly");
    }
    let run_id = summary
        .lines()
        .find_map(|l| l.strip_prefix("Run ")?.split(':').next())
        .unwrap_or_default();
    let topics =
        ["source", "dest", "fail", &format!("event_{run_id}")].map(|t| format!("{pipeline}_{t}"));
    delete_topics(bootstrap, &topics.each_ref().map(String::as_str));
    (seconds, cpu)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("WEIR_BENCH_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    weir_tests::plugins_dir();
    let bootstrap = kafka_bootstrap();
    // A freshly started broker JIT-compiles for its first seconds: warm it up,
    // then interleave rounds and take the median of each.
    raw(bootstrap, n / 4);
    let rounds: usize = std::env::var("WEIR_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let (mut raws, mut weirs, mut hybrids) = (Vec::new(), Vec::new(), Vec::new());
    let (mut weir_cpu, mut hybrid_cpu) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        raws.push(raw(bootstrap, n));
        let (seconds, cpu) = weir_mode(bootstrap, n, Layout::Kafka);
        weirs.push(seconds);
        weir_cpu.push(cpu);
        let (seconds, cpu) = weir_mode(bootstrap, n, Layout::Hybrid);
        hybrids.push(seconds);
        hybrid_cpu.push(cpu);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let show = |v: &[f64]| {
        v.iter()
            .map(|s| format!("{s:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Each round's runs are back to back, under the same load on this
    // (noisy) machine: their ratios are steadier than any one time.
    let per_round =
        |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(a, b)| a / b).collect() };
    let (kafka_vs_raw, hybrid_vs_kafka) = (per_round(&raws, &weirs), per_round(&weirs, &hybrids));
    println!(
        "rounds, seconds: raw [{}], kafka mode [{}], hybrid [{}]",
        show(&raws),
        show(&weirs),
        show(&hybrids)
    );
    println!(
        "per round: kafka mode / raw rate [{}], hybrid / kafka mode rate [{}]",
        show(&kafka_vs_raw),
        show(&hybrid_vs_kafka)
    );
    println!(
        "CPU seconds of the serving processes during the run: kafka mode (worker + indexer) [{}], hybrid (worker-indexer) [{}]",
        show(&weir_cpu),
        show(&hybrid_cpu)
    );
    let (raw_seconds, weir_seconds, hybrid_seconds) =
        (median(raws), median(weirs), median(hybrids));
    let rate = |s: f64| n as f64 / s;
    println!(
        "\nKafka pipeline, {n} documents of ~{} bytes, same broker, median of {rounds} rounds:",
        PAD + 50
    );
    println!("{:<52} {:>10} {:>10}", "", "docs/s", "seconds");
    for (name, seconds) in [
        ("raw rdkafka: produce -> relay -> consume", raw_seconds),
        ("weir --mode kafka: run -> worker -> indexer", weir_seconds),
        (
            "weir hybrid: run -> worker-indexer (2 pairs)",
            hybrid_seconds,
        ),
    ] {
        println!("{name:<52} {:>10.0} {seconds:>10.2}", rate(seconds));
    }
    println!(
        "kafka mode / raw rate: {:.2} (of the medians), {:.2} (median of the rounds' ratios)",
        raw_seconds / weir_seconds,
        median(kafka_vs_raw)
    );
    println!(
        "hybrid / kafka mode rate: {:.2} (of the medians), {:.2} (median of the rounds' ratios)",
        weir_seconds / hybrid_seconds,
        median(hybrid_vs_kafka)
    );
}
