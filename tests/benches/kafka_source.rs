//! The Kafka topic source through the `weir` binary against a raw rdkafka
//! consumer, same records, same broker, same run.
//!
//! - `weir`: the release binary as a process (`weir run`): the
//!   kafka-connector reading a topic of N JSON records (6 partitions) as a
//!   consumer group of its own, `max_records = N` so the run ends -> no
//!   stage -> jsonl-indexer, 2 worker threads; offsets committed as the
//!   documents are written.
//! - `raw`: this process, one thread: an rdkafka `BaseConsumer` in a group
//!   of its own reading the same N records, each value parsed, given its
//!   id (the key) and the same metadata object (topic, partition, offset,
//!   key, timestamp, headers), written as one JSON line to a buffered file;
//!   its offsets committed at the end.
//!
//! Wall and CPU (user + system, every thread) of the whole `weir` process
//! from outside; the raw consumer's wall and this process's CPU. The
//! broker's own CPU is in neither figure.
//!
//! `WEIR_BIN=target/release/weir cargo bench -p weir-tests --bench kafka_source`
//! (`WEIR_BENCH_ROUNDS`, default 3, medians; `WEIR_BENCH_SCALE`, default 1,
//! multiplies the 200,000 records; `WEIR_KAFKA_BOOTSTRAP` for a running broker).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

#[path = "common/measure.rs"]
mod measure;
#[path = "common/process.rs"]
mod process;

use measure::{env_number, median_of, process_cpu_seconds};

fn main() {
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let n = 200_000 * env_number("WEIR_BENCH_SCALE", 1).max(1);
    let weir = PathBuf::from(std::env::var("WEIR_BIN").unwrap_or_else(|_| {
        panic!("set WEIR_BIN to a release `weir` binary (cargo build --release -p weir)")
    }));
    let bootstrap = weir_tests::kafka_bootstrap().to_owned();
    let dist = weir_tests::plugins_dir().to_owned();
    let work = tempfile::tempdir().expect("tempdir");
    let topic = format!("bench_source_{:08x}", fastrand::u32(..));
    produce(&bootstrap, &topic, n);
    eprintln!("topic {topic}: {n} records");

    let (mut weir_wall, mut weir_cpu, mut raw_wall, mut raw_cpu) = (vec![], vec![], vec![], vec![]);
    for round in 0..=rounds {
        let group = format!("bench-{round}-{:08x}", fastrand::u32(..));
        let config = config(work.path(), &dist, &bootstrap, &topic, &group, n, round);
        let usage = process::timed(
            Command::new(&weir)
                .args(["run", "--no-progress"])
                .arg(&config),
        );
        let written = lines(&work.path().join(format!("out/weir-{round}.jsonl")));
        assert_eq!(written, n, "weir wrote every record");
        let group = format!("raw-{round}-{:08x}", fastrand::u32(..));
        let out = work.path().join(format!("out/raw-{round}.jsonl"));
        let (wall, cpu) = raw(&bootstrap, &topic, &group, n, &out);
        assert_eq!(lines(&out), n, "raw wrote every record");
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_file(work.path().join(format!("out/weir-{round}.jsonl")));
        // Round 0 warms the broker's page cache and the component cache.
        if round > 0 {
            weir_wall.push(usage.wall);
            weir_cpu.push(usage.cpu);
            raw_wall.push(wall);
            raw_cpu.push(cpu);
        }
    }
    let (ww, wc, rw, rc) = (
        median_of(weir_wall),
        median_of(weir_cpu),
        median_of(raw_wall),
        median_of(raw_cpu),
    );
    let per = |s: f64| s * 1e6 / n as f64;
    println!("kafka source, {n} JSON records (6 partitions), medians of {rounds} rounds:");
    println!("| consumer | wall s | records/s | CPU s | CPU µs/record |");
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| weir (binary) | {ww:.2} | {:.0} | {wc:.2} | {:.1} |",
        n as f64 / ww,
        per(wc)
    );
    println!(
        "| raw rdkafka | {rw:.2} | {:.0} | {rc:.2} | {:.1} |",
        n as f64 / rw,
        per(rc)
    );
    println!(
        "throughput weir/raw: {:.2} (goal >= 0.6); CPU per record weir/raw: {:.2}",
        rw / ww,
        wc / rc
    );
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

fn produce(bootstrap: &str, topic: &str, n: usize) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let made = futures_executor::block_on(admin.create_topics(
        [&NewTopic::new(topic, 6, TopicReplication::Fixed(1))],
        &options,
    ))
    .expect("create topic");
    for r in made {
        r.expect("topic made");
    }
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .expect("producer");
    for i in 0..n {
        let key = format!("k{}", i % 10_000);
        let value = format!(
            r#"{{"n":{i},"title":"record {i}","body":"a short body of text for record number {i}, as an event would carry","price":{}.5,"tags":["a","b"]}}"#,
            i % 1000
        );
        let mut record = BaseRecord::to(topic)
            .key(key.as_bytes())
            .payload(value.as_bytes());
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(5));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(120)).expect("produced");
}

fn config(
    dir: &Path,
    dist: &Path,
    bootstrap: &str,
    topic: &str,
    group: &str,
    n: usize,
    round: usize,
) -> PathBuf {
    std::fs::create_dir_all(dir.join("out")).expect("out");
    let plugin = |name: &str| format!("{:?}", dist.join(name).display().to_string());
    let text = format!(
        r#"
        [runner]
        cache_dir = {cache:?}
        [worker]
        threads = 2
        [indexer]
        plugin = {{ path = {jsonl}, config = {{ path = "/out/weir-{round}.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        [[connectors]]
        name = "bench"
        pipeline = "p"
        plugin = {{ path = {kafka}, config = {{ source = "t", batch = 1024, wait_ms = 200, max_records = {n} }}, grants = {{ kafka = {{ t = {{ brokers = {bootstrap:?}, topics = [{topic:?}], group = {group:?} }} }} }} }}
        [[pipelines]]
        name = "p"
        stages = []
        "#,
        cache = dir.join("cache").display().to_string(),
        out = dir.join("out").display().to_string(),
        jsonl = plugin("jsonl_indexer.wasm"),
        kafka = plugin("kafka_connector.wasm"),
    );
    let path = dir.join(format!("kafka-{round}.toml"));
    std::fs::write(&path, text).expect("config");
    path
}

/// The raw consumer: wall and CPU seconds.
fn raw(bootstrap: &str, topic: &str, group: &str, n: usize, out: &Path) -> (f64, f64) {
    let cpu = process_cpu_seconds();
    let start = Instant::now();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).expect("out"));
    let mut read = 0;
    while read < n {
        let Some(polled) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let record = polled.expect("record");
        let mut doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(record.payload().unwrap_or_default()).expect("JSON");
        let key = record
            .key()
            .map(|k| String::from_utf8_lossy(k).into_owned());
        let mut headers = serde_json::Map::new();
        if let Some(h) = record.headers() {
            for header in h.iter() {
                let value = String::from_utf8_lossy(header.value.unwrap_or_default()).into_owned();
                headers.insert(header.key.to_owned(), value.into());
            }
        }
        doc.insert("id".into(), key.clone().unwrap_or_default().into());
        doc.insert(
            "kafka".into(),
            serde_json::json!({
                "topic": record.topic(),
                "partition": record.partition(),
                "offset": record.offset(),
                "key": key,
                "timestamp_ms": record.timestamp().to_millis(),
                "headers": headers,
            }),
        );
        serde_json::to_writer(&mut file, &doc).expect("write");
        file.write_all(b"\n").expect("write");
        read += 1;
    }
    file.flush().expect("flush");
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit");
    // Leaving the group is part of the job, as it is for `weir run`.
    drop(consumer);
    (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu)
}
