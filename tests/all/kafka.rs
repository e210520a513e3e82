//! Kafka mode against a real Apache Kafka broker: separate runner, worker
//! and indexer processes; per-id order; crashes (kill -9) lose nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir_tests::{Proc, kafka_bootstrap, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// One pipeline's processes, on topics of its own.
struct Cluster {
    dir: tempfile::TempDir,
    bootstrap: String,
    config: PathBuf,
    pipeline: String,
    workers: Vec<Proc>,
    indexers: Vec<Proc>,
    /// `weir worker-indexer` processes (Hybrid mode).
    pairs: Vec<Proc>,
}

impl Cluster {
    /// `ids` documents (three times each, as create, update, delete), with
    /// `threads` worker threads per worker process and a stage that takes
    /// `delay_us` per document.
    fn new(name: &str, ids: u64, threads: usize, delay_us: u64) -> Self {
        Self::on(kafka_bootstrap(), name, ids, threads, delay_us, "")
    }

    /// The same on the broker at `bootstrap`, with `runner` (lines) in the
    /// config's `[runner]`.
    fn on(
        bootstrap: &str,
        name: &str,
        ids: u64,
        threads: usize,
        delay_us: u64,
        runner: &str,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("out")).expect("out dir");
        let pipeline = format!("{name}_{:08x}", fastrand::u32(..));
        let toml = format!(
            r#"
            [runner]
            connector_timeout = "600s"
            log_interval = "5s"
            cache_dir = {cache:?}
            {runner}
            [worker]
            threads = {threads}
            [kafka]
            bootstrap_servers = {bootstrap:?}
            topic_partitions = 6
            consumer = {{ "session.timeout.ms" = "6000", "heartbeat.interval.ms" = "1000" }}
            [indexer]
            batch_size = 200
            batch_timeout = "50ms"
            plugin = {{ path = @test-indexer, config = {{ record = "/out/indexed.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
            [[connectors]]
            name = "ops"
            pipeline = "{pipeline}"
            plugin = {{ path = @test-connector, config = {{ count = {ids}, ops = true }} }}
            [[pipelines]]
            name = "{pipeline}"
            stages = [
                {{ name = "copy", plugin = {{ path = @copy-fields, config = {{ mappings = [{{ source = "n", target = "m" }}] }} }} }},
                {{ name = "slow", plugin = {{ path = @hostile-stage, config = {{ delay_us = {delay_us} }} }} }},
            ]
            "#,
            cache = dir.path().join("cache").display().to_string(),
            out = dir.path().join("out").display().to_string(),
        );
        let config = dir.path().join("config.toml");
        std::fs::write(&config, with_plugins(&toml)).expect("config");
        let cluster = Self {
            dir,
            bootstrap: bootstrap.to_owned(),
            config,
            pipeline,
            workers: Vec::new(),
            indexers: Vec::new(),
            pairs: Vec::new(),
        };
        // Compile the plugins into the shared cache once, before the processes start.
        let mut validate = cluster.process("validate", &["validate"], &[]);
        assert!(
            validate.child.wait().expect("validate").success(),
            "config invalid: {}",
            cluster.log("validate")
        );
        cluster
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    fn process(&self, name: &str, args: &[&str], envs: &[(&str, String)]) -> Proc {
        let config = self.config.to_str().expect("utf-8");
        let mut all: Vec<&str> = args.to_vec();
        all.push(config);
        if matches!(
            args.first(),
            Some(&"worker" | &"indexer" | &"worker-indexer")
        ) {
            all.push(&self.pipeline);
        }
        let log = self.dir.path().join(format!("{name}.log"));
        Proc::start(name, Path::new(WEIR), &all, envs, &log)
    }

    fn start_worker(&mut self, i: usize) {
        let worker = self.process(&format!("worker-{i}"), &["worker"], &[]);
        put(&mut self.workers, i, worker);
    }

    /// Indexer `i` records what it indexes in a file of its own, with the time.
    fn start_indexer(&mut self, i: usize) {
        let indexer = self.recording(&format!("indexer-{i}"), "indexer");
        put(&mut self.indexers, i, indexer);
    }

    /// Worker–indexer process `i` (its pairs record to a file of its own).
    fn start_pairs(&mut self, i: usize) {
        let pairs = self.recording(&format!("pairs-{i}"), "worker-indexer");
        put(&mut self.pairs, i, pairs);
    }

    /// A `role` process named `name` whose indexer records to `/out/<name>.jsonl`.
    fn recording(&self, name: &str, role: &str) -> Proc {
        let env = [(
            "WEIR__INDEXER__PLUGIN__CONFIG__RECORD",
            format!("/out/{name}.jsonl"),
        )];
        self.process(name, &[role], &env)
    }

    /// Wait until this share of all documents is indexed, while the run goes on.
    fn wait_until_indexed(&self, run: &mut Proc, documents: usize) {
        let deadline = Instant::now() + Duration::from_secs(300);
        while self.indexed_lines() < documents {
            assert!(
                Instant::now() < deadline,
                "no progress:\n{}",
                self.log("run")
            );
            assert!(
                matches!(run.child.try_wait(), Ok(None)),
                "the run ended before the crash point:\n{}",
                self.log("run")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn start_run(&self) -> Proc {
        self.process("run", &["run", "--mode", "kafka", "--no-progress"], &[])
    }

    /// Lines written by every indexer so far.
    fn indexed_lines(&self) -> usize {
        self.output_files()
            .iter()
            .map(|f| std::fs::read_to_string(f).map_or(0, |t| t.lines().count()))
            .sum()
    }

    fn output_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.path().join("out"))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    }

    /// Per id, the versions indexed in the order they were indexed (by the
    /// indexers' wall clock: a partition can move from one indexer to another);
    /// plus unreadable lines (a process killed mid-write).
    fn indexed(&self) -> (HashMap<String, Vec<u64>>, usize) {
        let mut records: Vec<(u128, String, u64)> = Vec::new();
        let mut corrupt = 0;
        for file in self.output_files() {
            for line in std::fs::read_to_string(&file).expect("output").lines() {
                match serde_json::from_str::<serde_json::Value>(line) {
                    Ok(doc) => {
                        let id = doc["id"].as_str().expect("id").to_owned();
                        assert_eq!(doc["m"], doc["n"], "the stage ran on {id}");
                        let at = doc["at_ns"].as_u64().expect("time").into();
                        records.push((at, id, doc["version"].as_u64().expect("version")));
                    }
                    Err(_) => corrupt += 1,
                }
            }
        }
        records.sort_by_key(|r| r.0);
        let mut seen: HashMap<String, Vec<u64>> = HashMap::new();
        for (_, id, version) in records {
            seen.entry(id).or_default().push(version);
        }
        (seen, corrupt)
    }

    /// Every id indexed, and its last version indexed is the delete (3).
    /// Returns how many documents were indexed more than once.
    /// Wait for `run` to succeed, then until both groups have consumed
    /// everything (redelivered records included).
    fn wait_succeeded_and_drained(&self, run: &mut Proc) {
        let status = run.child.wait().expect("run");
        let log = self.log("run");
        // The log, then (last, where a clipped report still shows it) its
        // warnings and errors.
        let serious: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("stalled"))
            .collect();
        assert_eq!(
            status.code(),
            Some(0),
            "run failed:\n{log}\n--- its warnings and errors ---\n{}",
            serious.join("\n")
        );
        self.wait_drained();
    }

    /// Wait until the workers' and indexers' groups have committed every
    /// record of their topics.
    fn wait_drained(&self) {
        use rdkafka::TopicPartitionList;
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let groups = [
            (
                format!("weir-{}-workers", self.pipeline),
                format!("{}_source", self.pipeline),
            ),
            (
                format!("weir-{}-indexers", self.pipeline),
                format!("{}_dest", self.pipeline),
            ),
        ];
        let deadline = Instant::now() + Duration::from_secs(120);
        for (group, topic) in groups {
            let consumer: BaseConsumer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &self.bootstrap)
                .set("group.id", &group)
                .create()
                .expect("consumer");
            let timeout = Duration::from_secs(10);
            loop {
                let metadata = consumer
                    .fetch_metadata(Some(&topic), timeout)
                    .expect("metadata");
                let partitions: Vec<i32> = metadata.topics()[0]
                    .partitions()
                    .iter()
                    .map(|p| p.id())
                    .collect();
                let mut list = TopicPartitionList::new();
                for &p in &partitions {
                    list.add_partition(&topic, p);
                }
                let committed = consumer
                    .committed_offsets(list, timeout)
                    .expect("committed offsets");
                let behind = partitions.iter().any(|&p| {
                    let (_, high) = consumer
                        .fetch_watermarks(&topic, p, timeout)
                        .expect("watermarks");
                    let done = committed
                        .find_partition(&topic, p)
                        .and_then(|e| e.offset().to_raw())
                        .unwrap_or(0);
                    done < high
                });
                drop(committed);
                if !behind {
                    break;
                }
                assert!(Instant::now() < deadline, "{group} did not drain {topic}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    fn assert_complete_and_ordered(&self, ids: u64) -> usize {
        let (seen, corrupt) = self.indexed();
        let missing: Vec<String> = (0..ids)
            .map(|n| format!("doc-{n}"))
            .filter(|id| !seen.contains_key(id))
            .collect();
        assert!(
            missing.is_empty(),
            "{} ids never indexed, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
        for (id, versions) in &seen {
            for v in 1..=3 {
                assert!(
                    versions.contains(&v),
                    "{id}: version {v} missing from {versions:?}"
                );
            }
            assert_eq!(
                versions.last(),
                Some(&3),
                "{id}: the delete must be indexed last, got {versions:?}\n{}",
                self.trail(id)
            );
        }
        let total: usize = seen.values().map(Vec::len).sum();
        assert!(corrupt <= 1, "{corrupt} unreadable lines");
        total - (ids as usize) * 3
    }
}

/// A record read back from one of a pipeline's topics.
struct Record {
    partition: i32,
    offset: i64,
    key: Vec<u8>,
    payload: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
    millis: Option<i64>,
}

impl Record {
    fn version(&self) -> serde_json::Value {
        serde_json::from_slice::<serde_json::Value>(&self.payload)
            .map_or(serde_json::Value::Null, |d| d["version"].clone())
    }
}

impl Cluster {
    /// Every record of `topic` (this pipeline's `source` or `dest`), read
    /// from the start up to the high watermarks of now.
    fn records(&self, topic: &str) -> Result<Vec<Record>, String> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::message::{Headers, Message};
        let topic = format!("{}_{topic}", self.pipeline);
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", format!("reader-{}", fastrand::u32(..)))
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| e.to_string())?;
        let timeout = Duration::from_secs(10);
        let metadata = consumer
            .fetch_metadata(Some(&topic), timeout)
            .map_err(|e| e.to_string())?;
        let mut list = rdkafka::TopicPartitionList::new();
        let mut left: HashMap<i32, i64> = HashMap::new();
        for p in metadata.topics()[0].partitions() {
            let (low, high) = consumer
                .fetch_watermarks(&topic, p.id(), timeout)
                .map_err(|e| e.to_string())?;
            if high > low {
                list.add_partition_offset(&topic, p.id(), rdkafka::Offset::Offset(low))
                    .map_err(|e| e.to_string())?;
                left.insert(p.id(), high);
            }
        }
        if left.is_empty() {
            return Ok(Vec::new());
        }
        consumer.assign(&list).map_err(|e| e.to_string())?;
        let mut records = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !left.is_empty() {
            if Instant::now() > deadline {
                return Err(format!("{topic}: not read to its end in 60 s"));
            }
            let Some(Ok(message)) = consumer.poll(Duration::from_millis(500)) else {
                continue;
            };
            if left
                .get(&message.partition())
                .is_some_and(|&high| message.offset() + 1 >= high)
            {
                left.remove(&message.partition());
            }
            let headers = message.headers().map_or_else(Vec::new, |h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                    .collect()
            });
            records.push(Record {
                partition: message.partition(),
                offset: message.offset(),
                key: message.key().unwrap_or_default().to_vec(),
                payload: message.payload().unwrap_or_default().to_vec(),
                headers,
                millis: message.timestamp().to_millis(),
            });
        }
        Ok(records)
    }

    /// Where `id`'s records sit in the pipeline's source and destination
    /// topics (partition, offset, version, broker time), and what the
    /// processes logged about partitions and commits: what a failed order
    /// check needs to tell a redelivery from a reordering.
    fn trail(&self, id: &str) -> String {
        let mut out = String::new();
        for topic in ["source", "dest"] {
            match self.records(topic) {
                Ok(records) => {
                    for r in records.iter().filter(|r| r.key == id.as_bytes()) {
                        out.push_str(&format!(
                            "{topic} partition {} offset {} version {} at {:?}\n",
                            r.partition,
                            r.offset,
                            r.version(),
                            r.millis
                        ));
                    }
                }
                Err(e) => out.push_str(&format!("{topic}: {e}\n")),
            }
        }
        for name in ["worker-0", "worker-1", "indexer-0"] {
            for line in self.log(name).lines() {
                let lower = line.to_lowercase();
                if ["assign", "revok", "commit", "reset", "fail", "late copy"]
                    .iter()
                    .any(|w| lower.contains(w))
                {
                    out.push_str(&format!("{name}: {line}\n"));
                }
            }
        }
        out
    }

    /// Produce `record` again to its partition of the destination topic, as
    /// a worker that lost its partitions would deliver it late.
    fn deliver_late(&self, record: &Record) {
        use rdkafka::message::{Header, OwnedHeaders};
        use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
        let producer: ThreadedProducer<DefaultProducerContext> = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .expect("producer");
        let mut headers = OwnedHeaders::new();
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value),
            });
        }
        let topic = format!("{}_dest", self.pipeline);
        producer
            .send(
                BaseRecord::to(&topic)
                    .partition(record.partition)
                    .key(&record.key)
                    .payload(&record.payload)
                    .headers(headers),
            )
            .map_err(|(e, _)| e)
            .expect("produce");
        producer.flush(Duration::from_secs(30)).expect("flush");
    }
}

/// Put process `i` in `list`, in place of the one it restarts.
fn put(list: &mut Vec<Proc>, i: usize, process: Proc) {
    if i < list.len() {
        list[i] = process;
    } else {
        list.push(process);
    }
}

impl Cluster {
    /// Wait for `run` to succeed, check every document was indexed in
    /// per-id order, and stop every process cleanly; returns the duplicates.
    fn finish(&mut self, run: &mut Proc, ids: u64, what: &str) -> usize {
        let status = run.child.wait().expect("run");
        let code = status
            .code()
            .unwrap_or_else(|| panic!("{what}: run was killed:\n{}", self.log("run")));
        assert_eq!(code, 0, "{what}: run failed:\n{}", self.log("run"));
        let duplicates = self.assert_complete_and_ordered(ids);
        self.stop_all_cleanly();
        duplicates
    }
}

#[test]
fn kafka_mode_indexes_every_document_in_per_id_order() {
    const IDS: u64 = 33_334; // x3 operations: 100,002 documents
    let mut cluster = Cluster::new("e2e", IDS, 2, 0);
    // Worker 0 serves its metrics and health.
    let metered = cluster.process(
        "worker-0",
        &["worker"],
        &[("WEIR_METRICS_ADDR", "127.0.0.1:0".to_owned())],
    );
    put(&mut cluster.workers, 0, metered);
    for i in 1..3 {
        cluster.start_worker(i);
    }
    cluster.start_indexer(0);
    // The second indexer process runs two instances: three consumers in all.
    let second = cluster.process(
        "indexer-1",
        &["indexer"],
        &[
            (
                "WEIR__INDEXER__PLUGIN__CONFIG__RECORD",
                "/out/indexer-1.jsonl".to_owned(),
            ),
            ("WEIR__INDEXER__INSTANCES", "2".to_owned()),
        ],
    );
    put(&mut cluster.indexers, 1, second);
    let mut run = cluster.start_run();
    assert_worker_reports_its_lag(&mut cluster);
    let duplicates = cluster.finish(&mut run, IDS, "e2e");
    assert!(
        cluster.log("indexer-1").contains("instances=2"),
        "{}",
        cluster.log("indexer-1")
    );
    println!("e2e: {} documents, {duplicates} indexed twice", IDS * 3);
}

/// Worker 0's `/metrics` shows its consumer lag per partition (from
/// librdkafka's statistics, every 5 s) and `/readyz` says it is ready.
fn assert_worker_reports_its_lag(cluster: &mut Cluster) {
    let log = cluster.dir.path().join("worker-0.log");
    assert!(
        cluster.workers[0].wait_for_log(&log, "metrics on http://", 1, Duration::from_secs(60)),
        "{}",
        cluster.log("worker-0")
    );
    let addr = crate::operations::logged_address(&cluster.log("worker-0"), "metrics on http://");
    // Ready once it has its topics and starts consuming.
    let deadline = Instant::now() + Duration::from_secs(60);
    while crate::operations::request("GET", &format!("http://{addr}/readyz"), None, "").0 != 200 {
        assert!(Instant::now() < deadline, "the worker never became ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    loop {
        let metrics = crate::operations::scrape(&format!("http://{addr}/metrics"));
        let lags = metrics
            .samples
            .iter()
            .filter(|s| s.metric == "weir_kafka_consumer_lag")
            .count();
        if lags > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no consumer lag in the worker's metrics"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kill -9 one process of `role` (`worker`, `indexer`, or `worker-indexer`)
/// at a random point of each of `trials` runs,
/// restart it, and check nothing is missing. Returns the duplicates per trial.
fn crash_trials(role: &str, trials: usize) -> Vec<usize> {
    const IDS: u64 = 2_000;
    let mut duplicates = Vec::new();
    for trial in 0..trials {
        // A slow stage keeps workers busy while the indexer keeps up, so the
        // crash lands in the middle of processing for workers and indexer alike.
        let mut cluster;
        if role == "worker-indexer" {
            // Two processes of two pairs each.
            cluster = Cluster::new("crash_pairs", IDS, 2, 500);
            cluster.start_pairs(0);
            cluster.start_pairs(1);
        } else {
            cluster = Cluster::new(&format!("crash_{role}"), IDS, 1, 500);
            cluster.start_worker(0);
            cluster.start_worker(1);
            cluster.start_indexer(0);
        }
        let mut run = cluster.start_run();
        // A random crash point: once this share of the documents is indexed.
        let threshold = (IDS as usize * 3) * fastrand::usize(5..60) / 100;
        cluster.wait_until_indexed(&mut run, threshold);
        match role {
            "worker" => {
                cluster.workers[0].kill_hard();
                cluster.start_worker(0);
            }
            "indexer" => {
                cluster.indexers[0].kill_hard();
                cluster.start_indexer(0);
            }
            _ => {
                cluster.pairs[0].kill_hard();
                cluster.start_pairs(0);
            }
        }
        duplicates.push(cluster.finish(&mut run, IDS, &format!("trial {trial}")));
    }
    duplicates
}

/// A broker of a test's own (on `port`), for a test that stops it; the
/// jars are the shared broker's. Stopped when dropped.
struct OwnBroker {
    port: u16,
}

impl OwnBroker {
    fn start(port: u16) -> Self {
        let broker = Self { port };
        broker.script("start");
        broker
    }

    fn script(&self, command: &str) {
        let script = weir_tests::repo_root().join("tests/kafka/broker.sh");
        let status = std::process::Command::new("bash")
            .arg(&script)
            .arg(command)
            .env("WEIR_KAFKA_PORT", self.port.to_string())
            .status()
            .expect("broker.sh");
        assert!(status.success(), "broker.sh {command} failed");
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        self.script("stop");
    }
}

/// Busy loops on every core, for as long as it lives: a machine doing
/// other work beside the test.
struct CpuHog(Vec<std::process::Child>);

impl CpuHog {
    fn start() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Self(
            (0..cores)
                .map(|_| {
                    std::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("a busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A follower of run `run`'s dead letters on `topics` (as a fleet run's
/// process follows them), on a thread; what it handed over, in order.
struct Follower {
    finished: std::sync::Arc<std::sync::atomic::AtomicBool>,
    letters: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    thread: std::thread::JoinHandle<Result<(), String>>,
}

impl Follower {
    fn start(topics: weir::messenger::kafka::KafkaTopics, pipeline: &str, run: &str) -> Self {
        let finished = std::sync::Arc::<std::sync::atomic::AtomicBool>::default();
        let letters = std::sync::Arc::<std::sync::Mutex<Vec<String>>>::default();
        let (done, kept) = (finished.clone(), letters.clone());
        let (pipeline, run) = (pipeline.to_owned(), run.to_owned());
        let thread = std::thread::spawn(move || {
            weir::messenger::kafka::follow_run_letters(&topics, &pipeline, &run, &done, |l| {
                kept.lock().expect("letters").push(l.id);
            })
            .map_err(|e| e.to_string())
        });
        Self {
            finished,
            letters,
            thread,
        }
    }

    fn letters(&self) -> Vec<String> {
        self.letters.lock().expect("letters").clone()
    }

    fn wait_for(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.letters().len() < count {
            assert!(
                !self.thread.is_finished(),
                "the follower ended: {:?}",
                self.letters()
            );
            assert!(Instant::now() < deadline, "letters: {:?}", self.letters());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn finish(self) -> Vec<String> {
        self.finished
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let ended = self.thread.join().expect("the follower panicked");
        assert_eq!(ended, Ok(()), "the follower gave up");
        self.letters.lock().expect("letters").clone()
    }
}

/// Dead letters `ids` of run `run` on `topic`, as a worker writes them.
fn put_letters(bootstrap: &str, topic: &str, run: &str, ids: &[&str]) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
    let producer: ThreadedProducer<DefaultProducerContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("producer");
    for id in ids {
        let payload = format!(r#"{{"id":"{id}","n":1}}"#);
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "weir.run_id",
                value: Some(run),
            })
            .insert(Header {
                key: "weir.error",
                value: Some("asked to fail"),
            });
        producer
            .send(
                BaseRecord::to(topic)
                    .key(*id)
                    .payload(&payload)
                    .headers(headers),
            )
            .map_err(|(e, _)| e)
            .expect("produce");
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
}

/// A broker outage longer than the run's liveness and stall windows, with
/// every core busy: the run is not taken for stalled (its workers' silence
/// while the runner cannot reach the cluster says nothing), it ends with
/// every document indexed, and a dead-letter follower reads on after it,
/// each letter once.
#[test]
fn a_broker_restarted_mid_run_loses_nothing() {
    const IDS: u64 = 1_000;
    // Each window is long beside the time processes take to come back
    // after the outage on a loaded machine (a reconnect, a group rejoined):
    // that time counts, the outage does not.
    const LIVENESS: Duration = Duration::from_secs(20);
    const STALL: Duration = Duration::from_secs(40);
    let broker = OwnBroker::start(19392);
    let _hog = CpuHog::start();
    let mut cluster = Cluster::on(
        &broker.bootstrap(),
        "broker_restart",
        IDS,
        1,
        500,
        &format!(
            "liveness_timeout = \"{}s\"\nstall_timeout = \"{}s\"",
            LIVENESS.as_secs(),
            STALL.as_secs()
        ),
    );
    let letters_pipeline = format!("letters_{:08x}", fastrand::u32(..));
    let mut kafka = weir::config::KafkaConfig::new(broker.bootstrap());
    kafka.topic_partitions = Some(3);
    let topics = weir::messenger::kafka::KafkaTopics::new(kafka, &letters_pipeline);
    topics.ensure_pipeline_topics().expect("letters' topics");
    let follower = Follower::start(topics.clone(), &letters_pipeline, "run-1");
    cluster.start_worker(0);
    cluster.start_worker(1);
    cluster.start_indexer(0);
    let mut run = cluster.start_run();
    put_letters(
        &broker.bootstrap(),
        &topics.fail(),
        "run-1",
        &["a", "b", "c"],
    );
    put_letters(&broker.bootstrap(), &topics.fail(), "run-2", &["x"]);
    follower.wait_for(3);
    cluster.wait_until_indexed(&mut run, (IDS as usize * 3) / 4);
    // Stopped (SIGTERM, as an operator would), kept down for longer than
    // both windows (the outage is what is tested: the time is the
    // scenario, not a wait for something), and started again on the same
    // storage while every process is mid-run.
    broker.script("stop");
    let down = Instant::now();
    let outage = LIVENESS.max(STALL) + Duration::from_secs(5);
    while down.elapsed() < outage {
        assert!(
            matches!(run.child.try_wait(), Ok(None)),
            "the run ended during the outage:\n{}",
            cluster.log("run")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        cluster.log("run").contains("lost Kafka"),
        "the runner saw the outage:\n{}",
        cluster.log("run")
    );
    broker.script("restart");
    println!("broker down for {:.1?}", down.elapsed());
    put_letters(&broker.bootstrap(), &topics.fail(), "run-1", &["d", "e"]);
    follower.wait_for(5);
    // Records whose offsets were not committed when the broker went away
    // are redelivered (at least once), possibly after the run counted them
    // done: the index is checked once both groups have consumed everything.
    cluster.wait_succeeded_and_drained(&mut run);
    let log = cluster.log("run");
    assert!(!log.contains("stalled"), "{log}");
    let duplicates = cluster.assert_complete_and_ordered(IDS);
    cluster.stop_all_cleanly();
    // Each of the run's letters once (partitions interleave them).
    let mut letters = follower.finish();
    letters.sort();
    assert_eq!(letters, ["a", "b", "c", "d", "e"]);
    println!("broker restart mid-run: {duplicates} documents indexed twice");
}

/// A worker that lost its partitions without knowing it (a broker restart
/// that forgot the group) may deliver its queued outputs after the new
/// owner sent newer versions of their ids: the indexer does not index such
/// a late copy of an older version, and does index a copy of the newest.
#[test]
fn a_late_copy_of_an_older_version_is_not_indexed_after_a_newer_one() {
    const IDS: u64 = 50;
    let mut cluster = Cluster::new("late_copy", IDS, 1, 0);
    cluster.start_worker(0);
    cluster.start_indexer(0);
    let mut run = cluster.start_run();
    cluster.wait_succeeded_and_drained(&mut run);
    cluster.assert_complete_and_ordered(IDS);
    let dest = cluster.records("dest").expect("destination topic");
    let copy_of = |version: u64| {
        dest.iter()
            .find(|r| r.key == b"doc-7" && r.version() == version)
            .unwrap_or_else(|| panic!("doc-7 version {version} is not on the topic"))
    };
    assert!(
        copy_of(1).headers.iter().any(|(k, _)| k == "weir.origin"),
        "a worker's output names its source record"
    );
    // The create again, after the delete: turned away, and its offset
    // committed all the same (nothing else follows it).
    cluster.deliver_late(copy_of(1));
    cluster.wait_drained();
    let (seen, _) = cluster.indexed();
    assert_eq!(seen["doc-7"], vec![1, 2, 3], "{}", cluster.trail("doc-7"));
    assert!(
        cluster
            .log("indexer-0")
            .contains("late copy of an older version"),
        "{}",
        cluster.log("indexer-0")
    );
    // The delete again (a redelivery of the newest version) is indexed.
    cluster.deliver_late(copy_of(3));
    cluster.wait_drained();
    let (seen, _) = cluster.indexed();
    assert_eq!(
        seen["doc-7"],
        vec![1, 2, 3, 3],
        "{}",
        cluster.trail("doc-7")
    );
    cluster.stop_all_cleanly();
}

#[test]
fn killing_a_worker_mid_run_loses_nothing() {
    let duplicates = crash_trials("worker", 5);
    println!("worker kill -9, 5 trials of 6,000 documents: duplicates per trial {duplicates:?}");
}

#[test]
fn killing_an_indexer_mid_run_loses_nothing() {
    let duplicates = crash_trials("indexer", 5);
    println!("indexer kill -9, 5 trials of 6,000 documents: duplicates per trial {duplicates:?}");
}

impl Cluster {
    fn stop_all_cleanly(&mut self) {
        let names: Vec<String> = self
            .workers
            .iter()
            .chain(&self.indexers)
            .chain(&self.pairs)
            .map(|p| p.name.clone())
            .collect();
        let mut procs: Vec<Proc> = self
            .workers
            .drain(..)
            .chain(self.indexers.drain(..))
            .chain(self.pairs.drain(..))
            .collect();
        for (p, name) in procs.iter_mut().zip(names) {
            assert!(
                p.stop(),
                "{name} did not stop cleanly:\n{}",
                self.log(&name)
            );
        }
    }
}

// ---- Hybrid mode: `weir worker-indexer` ----

#[test]
fn hybrid_mode_indexes_every_document_in_per_id_order() {
    const IDS: u64 = 33_334; // x3 operations: 100,002 documents
    let mut cluster = Cluster::new("hybrid", IDS, 2, 0);
    cluster.start_pairs(0);
    cluster.start_pairs(1);
    let mut run = cluster.start_run();
    let duplicates = cluster.finish(&mut run, IDS, "hybrid e2e");
    println!(
        "hybrid e2e, 2 processes x 2 pairs: {} documents, {duplicates} indexed twice",
        IDS * 3
    );
}

#[test]
fn killing_a_worker_indexer_mid_run_loses_nothing() {
    let duplicates = crash_trials("worker-indexer", 5);
    println!(
        "worker-indexer kill -9, 5 trials of 6,000 documents: duplicates per trial {duplicates:?}"
    );
}

#[test]
fn a_worker_indexer_joining_mid_run_loses_nothing() {
    const IDS: u64 = 4_000;
    let mut cluster = Cluster::new("hybrid_join", IDS, 2, 300);
    cluster.start_pairs(0);
    cluster.start_pairs(1);
    let mut run = cluster.start_run();
    let threshold = (IDS as usize * 3) * fastrand::usize(10..50) / 100;
    cluster.wait_until_indexed(&mut run, threshold);
    cluster.start_pairs(2);
    let duplicates = cluster.finish(&mut run, IDS, "join");
    let joined = cluster.log("pairs-2");
    assert!(
        joined.contains("partitions assigned"),
        "the third process never got partitions:\n{joined}"
    );
    println!(
        "worker-indexer joining mid-run: {} documents, {duplicates} indexed twice",
        IDS * 3
    );
}

#[test]
fn a_document_too_large_for_kafka_fails_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pipeline = format!("large_{:08x}", fastrand::u32(..));
    let toml = format!(
        r#"
        [runner]
        connector_timeout = "120s"
        cache_dir = {cache:?}
        [worker]
        threads = 1
        [kafka]
        bootstrap_servers = {bootstrap:?}
        topic_partitions = 2
        max_message_bytes = 1048576
        [indexer]
        batch_timeout = "20ms"
        plugin = {{ path = @test-indexer }}
        [[connectors]]
        name = "docs"
        pipeline = "{pipeline}"
        plugin = {{ path = @test-connector, config = {{ docs = [
            {{ id = "small-1", action = "ok" }},
            {{ id = "large", action = "grow", count = "2" }},
            {{ id = "small-2", action = "ok" }},
        ] }} }}
        [[pipelines]]
        name = "{pipeline}"
        stages = [{{ name = "hostile", plugin = {{ path = @hostile-stage }} }}]
        "#,
        cache = dir.path().join("cache").display().to_string(),
        bootstrap = kafka_bootstrap(),
    );
    let config = dir.path().join("config.toml");
    std::fs::write(&config, with_plugins(&toml)).expect("config");
    let config = config.to_str().expect("utf-8");
    let log = |name: &str| dir.path().join(format!("{name}.log"));
    let start = |role: &str| {
        Proc::start(
            role,
            Path::new(WEIR),
            &[role, config, &pipeline],
            &[],
            &log(role),
        )
    };
    let (mut worker, mut indexer) = (start("worker"), start("indexer"));
    let mut run = Proc::start(
        "run",
        Path::new(WEIR),
        &["run", "--mode", "kafka", "--no-progress", config],
        &[],
        &log("run"),
    );
    let status = run.child.wait().expect("run");
    let summary = std::fs::read_to_string(log("run")).unwrap_or_default();
    assert_eq!(
        status.code(),
        Some(3),
        "partial success expected:\n{summary}"
    );
    let line = summary
        .lines()
        .find(|l| l.starts_with("docs "))
        .unwrap_or_else(|| panic!("no summary row:\n{summary}"));
    let counts: Vec<&str> = line.split_whitespace().collect();
    // connector pipeline published children succeeded failed dropped
    assert_eq!(&counts[2..6], ["3", "0", "2", "1"], "{line}");
    assert!(
        worker.stop() && indexer.stop(),
        "the worker survived the large document and stops cleanly:\n{}",
        std::fs::read_to_string(log("worker")).unwrap_or_default()
    );
}

#[test]
fn kafka_workers_reload_their_stages_mid_run_keeping_per_id_order() {
    const IDS: u64 = 1500;
    let mut cluster = Cluster::new("reload", IDS, 2, 0);
    for i in 0..2 {
        let worker = cluster.process(&format!("worker-{i}"), &["worker", "--watch"], &[]);
        put(&mut cluster.workers, i, worker);
    }
    cluster.start_indexer(0);
    let mut run = cluster.start_run();
    cluster.wait_until_indexed(&mut run, 600);
    // Mid-run, every worker of the pipeline takes up the change (a second
    // mapping) between two batches.
    let text = std::fs::read_to_string(&cluster.config).expect("config");
    let changed = text.replace(
        r#"mappings = [{ source = "n", target = "m" }]"#,
        r#"mappings = [{ source = "n", target = "m" }, { source = "n", target = "tag" }]"#,
    );
    assert_ne!(text, changed);
    std::fs::write(&cluster.config, changed).expect("config");
    for i in 0..2 {
        let log = cluster.dir.path().join(format!("worker-{i}.log"));
        assert!(
            cluster.workers[i].wait_for_log(&log, "config reloaded", 1, Duration::from_secs(60)),
            "worker {i} did not reload:\n{}",
            cluster.log(&format!("worker-{i}"))
        );
        assert!(
            cluster
                .log(&format!("worker-{i}"))
                .contains("workers=2 switched=2"),
            "{}",
            cluster.log(&format!("worker-{i}"))
        );
    }
    let status = run.child.wait().expect("run");
    assert_eq!(status.code(), Some(0), "{}", cluster.log("run"));
    let first = cluster.indexed_lines();
    // A run after the switch runs on the new stages only.
    let mut again = cluster.process("run-2", &["run", "--mode", "kafka", "--no-progress"], &[]);
    cluster.finish(&mut again, IDS, "reload");
    // Per id, in the order indexed: once a version ran on the new stages,
    // every later one did too.
    let mut records: Vec<(u64, String, bool)> = Vec::new();
    for file in cluster.output_files() {
        for line in std::fs::read_to_string(&file).expect("output").lines() {
            let Ok(doc) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let id = doc["id"].as_str().expect("id").to_owned();
            let at = doc["at_ns"].as_u64().expect("time");
            records.push((at, id, doc["tag"] == doc["n"]));
        }
    }
    records.sort_by_key(|r| r.0);
    let mut last: HashMap<String, bool> = HashMap::new();
    for (_, id, new) in &records {
        let before = last.insert(id.clone(), *new);
        assert!(
            before != Some(true) || *new,
            "{id}: a later version ran on the old stages"
        );
    }
    let new = records.iter().filter(|r| r.2).count();
    assert!(
        new >= records.len() - first,
        "{new} of the {} documents after the switch ran on the new stages",
        records.len() - first
    );
}
