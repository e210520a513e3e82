//! The queue source through the `weir` binary against a native lapin
//! consumer, same messages, same broker, same run.
//!
//! - `weir`: the release binary as a process (`weir run`): the
//!   queue-connector consuming a quorum queue of N JSON messages
//!   (`grants.queues`: 2 consumers, batches of 256, prefetch 512 each),
//!   `max_messages = N` so the run ends -> no stage -> jsonl-indexer, 2
//!   worker threads; each message acknowledged once its document is written.
//! - `native`: this process: one lapin consumer (prefetch 1024) on a queue
//!   of the same N messages, each body parsed, given its id (the message
//!   id) and the same metadata object (queue, message id, timestamp,
//!   headers, attempt), written as one JSON line to a buffered file, and
//!   acknowledged (256 at a time, `multiple`: a strong baseline; weir
//!   acknowledges each message once its document is written).
//!
//! Wall and CPU (user + system, every thread) of the whole `weir` process
//! from outside; the native consumer's wall and this process's CPU while it
//! runs. The broker's own CPU is in neither figure; publishing the messages
//! is not measured.
//!
//! `WEIR_BIN=target/release/weir cargo bench -p weir-tests --bench queue_source`
//! (`WEIR_BENCH_ROUNDS`, default 3, medians; `WEIR_BENCH_SCALE`, default 1,
//! multiplies the 100,000 messages; `WEIR_TEST_AMQP_URL` for a running broker).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};

#[path = "common/measure.rs"]
mod measure;
#[path = "common/process.rs"]
mod process;

use measure::{env_number, median_of, process_cpu_seconds};

fn main() {
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let n = 100_000 * env_number("WEIR_BENCH_SCALE", 1).max(1);
    let weir = PathBuf::from(std::env::var("WEIR_BIN").unwrap_or_else(|_| {
        panic!("set WEIR_BIN to a release `weir` binary (cargo build --release -p weir)")
    }));
    let url = weir_tests::amqp_url().to_owned();
    let dist = weir_tests::plugins_dir().to_owned();
    let work = tempfile::tempdir().expect("tempdir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let tag = format!("{:08x}", fastrand::u32(..));

    let (mut weir_wall, mut weir_cpu, mut native_wall, mut native_cpu) =
        (vec![], vec![], vec![], vec![]);
    for round in 0..=rounds {
        let weir_queue = format!("bench-weir-{tag}-{round}");
        let native_queue = format!("bench-native-{tag}-{round}");
        runtime.block_on(publish(&url, &weir_queue, n));
        runtime.block_on(publish(&url, &native_queue, n));
        let config = config(work.path(), &dist, &weir_queue, n, round);
        let usage = process::timed(
            Command::new(&weir)
                .args(["run", "--no-progress"])
                .arg(&config)
                .env("QUEUE_URL", &url),
        );
        let written = lines(&work.path().join(format!("out/weir-{round}.jsonl")));
        assert_eq!(written, n, "weir wrote every message");
        let out = work.path().join(format!("out/native-{round}.jsonl"));
        let cpu = process_cpu_seconds();
        let start = Instant::now();
        runtime.block_on(native(&url, &native_queue, n, &out));
        let (wall, cpu) = (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu);
        assert_eq!(lines(&out), n, "native wrote every message");
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_file(work.path().join(format!("out/weir-{round}.jsonl")));
        for queue in [&weir_queue, &native_queue] {
            runtime.block_on(delete(&url, queue));
        }
        runtime.block_on(delete(&url, &format!("{weir_queue}.dead-letters")));
        // Round 0 warms the broker and the component cache.
        if round > 0 {
            weir_wall.push(usage.wall);
            weir_cpu.push(usage.cpu);
            native_wall.push(wall);
            native_cpu.push(cpu);
        }
    }
    let (ww, wc, nw, nc) = (
        median_of(weir_wall),
        median_of(weir_cpu),
        median_of(native_wall),
        median_of(native_cpu),
    );
    let per = |s: f64| s * 1e6 / n as f64;
    println!(
        "queue source, {n} JSON messages (RabbitMQ quorum queue), medians of {rounds} rounds:"
    );
    println!("| consumer | wall s | messages/s | CPU s | CPU µs/message |");
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| weir (binary) | {ww:.2} | {:.0} | {wc:.2} | {:.1} |",
        n as f64 / ww,
        per(wc)
    );
    println!(
        "| native lapin | {nw:.2} | {:.0} | {nc:.2} | {:.1} |",
        n as f64 / nw,
        per(nc)
    );
    println!(
        "CPU per message native/weir: {:.2} (goal >= 0.5); throughput weir/native: {:.2}",
        nc / wc,
        nw / ww
    );
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

fn quorum() -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    args
}

/// `n` persistent JSON messages on `queue` (declared quorum), confirmed.
async fn publish(url: &str, queue: &str, n: usize) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = conn.create_channel().await.expect("channel");
    channel
        .queue_declare(queue.into(), QueueDeclareOptions::durable(), quorum())
        .await
        .expect("declare");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    let mut pending = Vec::with_capacity(2048);
    for i in 0..n {
        let body = format!(
            r#"{{"n":{i},"title":"message {i}","body":"a short body of text for message number {i}, as an event would carry","price":{}.5,"tags":["a","b"]}}"#,
            i % 1000
        );
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("m-{i}").into());
        let confirm = channel
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                properties,
            )
            .await
            .expect("publish");
        pending.push(confirm);
        if pending.len() == 2048 {
            for c in pending.drain(..) {
                assert!(c.await.expect("confirm").is_ack());
            }
        }
    }
    for c in pending {
        assert!(c.await.expect("confirm").is_ack());
    }
    let _ = conn.close(200, "published".into()).await;
}

async fn delete(url: &str, queue: &str) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = conn.create_channel().await.expect("channel");
    let _ = channel
        .queue_delete(queue.into(), QueueDeleteOptions::default())
        .await;
    let _ = conn.close(200, "deleted".into()).await;
}

/// The native consumer: each message as the queue-connector makes it, one
/// JSON line, acknowledged.
async fn native(url: &str, queue: &str, n: usize, out: &Path) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = conn.create_channel().await.expect("channel");
    channel
        .basic_qos(1024, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "native".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).expect("out"));
    let mut read = 0;
    while read < n {
        let delivery = consumer
            .next()
            .await
            .expect("a message")
            .expect("delivered");
        let mut doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&delivery.data).expect("JSON");
        let id = delivery
            .properties
            .message_id()
            .as_ref()
            .map(|m| m.as_str().to_owned());
        let mut headers = serde_json::Map::new();
        if let Some(table) = delivery.properties.headers() {
            for (k, v) in table.inner() {
                headers.insert(k.as_str().to_owned(), format!("{v:?}").into());
            }
        }
        doc.insert("id".into(), id.clone().unwrap_or_default().into());
        doc.insert(
            "queue".into(),
            serde_json::json!({
                "queue": queue,
                "message_id": id,
                "timestamp_ms": delivery.properties.timestamp().map(|t| t * 1000),
                "headers": headers,
                "attempt": 1,
            }),
        );
        serde_json::to_writer(&mut file, &doc).expect("write");
        file.write_all(b"\n").expect("write");
        read += 1;
        // Acknowledged 256 at a time (`multiple`), the cheapest a client
        // can: one frame for many messages.
        if read % 256 == 0 || read == n {
            delivery
                .ack(BasicAckOptions { multiple: true })
                .await
                .expect("ack");
        }
    }
    file.flush().expect("flush");
    let _ = conn.close(200, "done".into()).await;
}

fn config(dir: &Path, dist: &Path, queue: &str, n: usize, round: usize) -> PathBuf {
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
        plugin = {{ path = {queue_connector}, config = {{ source = "q", batch = 256, wait_ms = 200, max_messages = {n} }}, grants = {{ queues = {{ q = {{ url = "${{QUEUE_URL}}", queue = {queue:?}, batch_size = 256, batch_wait = "5ms", concurrency = 2 }} }} }} }}
        [[pipelines]]
        name = "p"
        stages = []
        "#,
        cache = dir.join("cache").display().to_string(),
        out = dir.join("out").display().to_string(),
        jsonl = plugin("jsonl_indexer.wasm"),
        queue_connector = plugin("queue_connector.wasm"),
    );
    let path = dir.join(format!("queue-{round}.toml"));
    std::fs::write(&path, text).expect("config");
    path
}
