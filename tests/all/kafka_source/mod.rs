//! The Kafka topic source (`grants.kafka`, `kafka-connector`) against the
//! real broker, through the `weir` binary: records become documents,
//! offsets are committed only once their documents are done (kill -9
//! loses nothing), invalid records are dead-lettered with their origin,
//! consumers of one group share partitions, and one key's records are
//! indexed in order.

mod crash;
mod delivery;
mod modes;
mod pause;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use weir_tests::{Proc, kafka_bootstrap, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// Generous: the machine may be loaded.
const PATIENCE: Duration = Duration::from_secs(240);

/// A topic of its own, with `partitions`, and a group name.
pub(super) struct Topic {
    pub(super) name: String,
    pub(super) group: String,
    producer: ThreadedProducer<DefaultProducerContext>,
}

impl Topic {
    pub(super) fn new(prefix: &str, partitions: i32) -> Self {
        let tag = format!("{:08x}", fastrand::u32(..));
        let name = format!("{prefix}_{tag}");
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", kafka_bootstrap())
            .create()
            .expect("admin client");
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let topic = NewTopic::new(&name, partitions, TopicReplication::Fixed(1));
        let made = futures_executor::block_on(admin.create_topics([&topic], &options))
            .expect("create topic");
        for result in made {
            result.expect("topic made");
        }
        let producer = ClientConfig::new()
            .set("bootstrap.servers", kafka_bootstrap())
            .set("linger.ms", "5")
            .create()
            .expect("producer");
        Self {
            group: format!("weir-test-{tag}"),
            name,
            producer,
        }
    }

    /// Produce `value` under `key` (None: no key), with `headers`.
    pub(super) fn send(&self, key: Option<&str>, value: &[u8], headers: &[(&str, &str)]) {
        let mut h = OwnedHeaders::new();
        for (k, v) in headers {
            h = h.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        let mut record = BaseRecord::<str, [u8]>::to(&self.name)
            .payload(value)
            .headers(h);
        if let Some(key) = key {
            record = record.key(key);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return,
                Err((_, back)) => {
                    record = back;
                    self.producer.poll(Duration::from_millis(5));
                }
            }
        }
    }

    /// A tombstone: `key` with no value.
    pub(super) fn tombstone(&self, key: &str) {
        let record = BaseRecord::<str, [u8]>::to(&self.name).key(key);
        self.producer
            .send(record)
            .map_err(|(e, _)| e)
            .expect("tombstone produced");
    }

    pub(super) fn flush(&self) {
        self.producer
            .flush(Duration::from_secs(60))
            .expect("records produced");
    }

    /// The group's committed offset of each partition (absent: none).
    pub(super) fn committed(&self) -> HashMap<i32, i64> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", kafka_bootstrap())
            .set("group.id", &self.group)
            .create()
            .expect("consumer");
        let metadata = consumer
            .fetch_metadata(Some(&self.name), Duration::from_secs(30))
            .expect("metadata");
        let mut list = rdkafka::TopicPartitionList::new();
        for p in metadata.topics()[0].partitions() {
            list.add_partition(&self.name, p.id());
        }
        let committed = consumer
            .committed_offsets(list, Duration::from_secs(30))
            .expect("committed offsets");
        let out = committed
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                rdkafka::Offset::Offset(o) => Some((e.partition(), o)),
                _ => None,
            })
            .collect();
        drop(committed);
        out
    }
}

/// A run of the kafka-connector in a folder of its own.
pub(super) struct Run {
    pub(super) dir: tempfile::TempDir,
    pub(super) config: PathBuf,
    pipeline: String,
    kafka_mode: bool,
}

impl Run {
    /// A config reading `topic` as its group into `out/<file>`, with
    /// `connector` (more kafka-connector settings, TOML inline-table
    /// entries) and `stages` (TOML array items).
    pub(super) fn new(topic: &Topic, connector: &str, stages: &str) -> Self {
        Self::with_properties(topic, connector, stages, "")
    }

    /// [`Run::new`] with more consumer `properties` (inline-table entries).
    pub(super) fn with_properties(
        topic: &Topic,
        connector: &str,
        stages: &str,
        properties: &str,
    ) -> Self {
        Self::build(topic, connector, stages, properties, false)
    }

    /// [`Run::new`] in Kafka mode: a pipeline of its own on the test
    /// cluster, its workers and indexers [`Run::serve`]d apart.
    pub(super) fn in_kafka_mode(topic: &Topic, connector: &str) -> Self {
        Self::build(topic, connector, "", "", true)
    }

    fn build(
        topic: &Topic,
        connector: &str,
        stages: &str,
        properties: &str,
        kafka_mode: bool,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("out")).expect("out");
        let (pipeline, kafka) = if kafka_mode {
            (
                format!("ks_{:08x}", fastrand::u32(..)),
                format!(
                    "[kafka]\nbootstrap_servers = {:?}\ntopic_partitions = 3\nconsumer = {{ \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"1000\" }}",
                    kafka_bootstrap()
                ),
            )
        } else {
            ("p".to_owned(), String::new())
        };
        // Kafka mode's pairs are indexer instances, each with a file.
        let docs = if kafka_mode {
            "docs-{instance}.jsonl"
        } else {
            "docs.jsonl"
        };
        let toml = format!(
            r#"
            {kafka}
            [runner]
            cache_dir = {cache:?}
            log_interval = "2s"
            grace_period = "60s"
            [worker]
            threads = 2
            [indexer]
            batch_size = 100
            batch_timeout = "20ms"
            plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/{docs}" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
            [dead_letters]
            path = "dead.jsonl"
            [[connectors]]
            name = "topic"
            pipeline = "{pipeline}"
            plugin = {{ path = @kafka-connector, config = {{ source = "orders", batch = 256, wait_ms = 200 {connector} }}, grants = {{ kafka = {{ orders = {{ brokers = {brokers:?}, topics = [{topic:?}], group = {group:?}, properties = {{ "session.timeout.ms" = "6000", "heartbeat.interval.ms" = "500" {properties} }} }} }} }} }}
            [[pipelines]]
            name = "{pipeline}"
            stages = [{stages}]
            "#,
            cache = dir.path().join("cache").display().to_string(),
            out = dir.path().join("out").display().to_string(),
            brokers = kafka_bootstrap(),
            topic = topic.name,
            group = topic.group,
        );
        let config = dir.path().join("config.toml");
        std::fs::write(&config, with_plugins(&toml)).expect("config");
        Self {
            dir,
            config,
            pipeline,
            kafka_mode,
        }
    }

    /// `weir run` on the config, its log in `<name>.log`.
    pub(super) fn start(&self, name: &str) -> Proc {
        let config = self.config.to_str().expect("utf-8");
        let mut args = vec!["run", "--no-progress", config];
        if self.kafka_mode {
            args.extend(["--mode", "kafka"]);
        }
        Proc::start(
            name,
            Path::new(WEIR),
            &args,
            &[("RUST_LOG", "info".into())],
            &self.log_path(name),
        )
    }

    /// `weir <role> <config> <pipeline>`: a serving process of Kafka mode.
    pub(super) fn serve(&self, name: &str, role: &str) -> Proc {
        Proc::start(
            name,
            Path::new(WEIR),
            &[role, self.config.to_str().expect("utf-8"), &self.pipeline],
            &[("RUST_LOG", "info".into())],
            &self.log_path(name),
        )
    }

    pub(super) fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    pub(super) fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    /// The documents indexed so far, in file order (lines cut by a kill
    /// apart).
    pub(super) fn indexed(&self) -> Vec<serde_json::Value> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("out"))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.retain(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("docs"))
        });
        files.sort();
        files.iter().flat_map(|f| lines(f)).collect()
    }

    pub(super) fn dead_letters(&self) -> Vec<serde_json::Value> {
        lines(&self.dir.path().join("dead.jsonl"))
    }

    /// Wait until `done` holds of this run's output, while `run` goes on.
    pub(super) fn wait(
        &self,
        run: &mut Proc,
        name: &str,
        what: &str,
        done: impl Fn(&Self) -> bool,
    ) {
        let deadline = Instant::now() + PATIENCE;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "{what}: not reached in time:\n{}",
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

/// Records `from..to` (`{"n": i, ...}`, keyed by `i % 997`), flushed.
pub(super) fn produce(topic: &Topic, from: usize, to: usize) {
    for i in from..to {
        let value = format!(r#"{{"n":{i},"body":"record number {i}"}}"#);
        topic.send(Some(&format!("k{}", i % 997)), value.as_bytes(), &[]);
    }
    topic.flush();
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
