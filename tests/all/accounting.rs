//! Run accounting that always ends with the truth, on a real broker and in
//! local mode: documents too large for a topic fail alone, a worker that
//! cannot hand a document on stops (and its records are redelivered),
//! parents never complete before their children, messages that are not
//! documents fail their id, runs that cannot finish end stalled instead of
//! waiting out their timeout, and signals stop runs and indexers gracefully.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use weir_tests::{Proc, kafka_bootstrap, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// One pipeline on topics of its own, and the processes serving it.
pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) config: PathBuf,
    pub(crate) pipeline: String,
}

impl Setup {
    /// `body` is a config with `{pipeline}`, `{bootstrap}`, `{cache}` and
    /// `{out}` (a writable directory, `/out` to plugins) to fill in.
    pub(crate) fn new(name: &str, body: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).expect("out dir");
        let pipeline = format!("{name}_{:08x}", fastrand::u32(..));
        let toml = body
            .replace("{pipeline}", &pipeline)
            .replace("{bootstrap}", &format!("{:?}", kafka_bootstrap()))
            .replace(
                "{cache}",
                &format!("{:?}", dir.path().join("cache").display().to_string()),
            )
            .replace("{out}", &format!("{:?}", out.display().to_string()));
        let config = dir.path().join("config.toml");
        std::fs::write(&config, with_plugins(&toml)).expect("config");
        let setup = Self {
            dir,
            config,
            pipeline,
        };
        // Compile the plugins into the shared cache once, before the processes start.
        let mut validate = setup.start("validate", &["validate"], &[]);
        assert!(
            validate.child.wait().expect("validate").success(),
            "config invalid: {}",
            setup.log("validate")
        );
        setup
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    pub(crate) fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    /// Start `weir <args> <config> [<pipeline>]` as process `name`.
    pub(crate) fn start(&self, name: &str, args: &[&str], envs: &[(&str, String)]) -> Proc {
        let config = self.config.to_str().expect("utf-8");
        let mut all: Vec<&str> = args.to_vec();
        all.push(config);
        if matches!(args.first(), Some(&"worker" | &"indexer")) {
            all.push(&self.pipeline);
        }
        Proc::start(name, Path::new(WEIR), &all, envs, &self.log_path(name))
    }

    pub(crate) fn run_kafka(&self) -> Proc {
        self.start("run", &["run", "--mode", "kafka", "--no-progress"], &[])
    }

    /// The run's exit code (it must end within `within`).
    pub(crate) fn exit_code(&self, run: &mut Proc, within: Duration) -> i32 {
        self.exit_code_of(run, within)
    }

    /// A process's exit code (it must end within `within`).
    fn exit_code_of(&self, process: &mut Proc, within: Duration) -> i32 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = process.child.try_wait().expect("wait") {
                return status.code().unwrap_or_else(|| {
                    panic!("{} was killed:\n{}", process.name, self.log(&process.name))
                });
            }
            assert!(
                Instant::now() < deadline,
                "{} did not end within {within:?}:\n{}",
                process.name,
                self.log(&process.name)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The summary row of `connector`: published, children, succeeded,
    /// failed, dropped, duplicates.
    fn counts(&self, connector: &str) -> Vec<u64> {
        self.counts_in("run", connector)
    }

    /// The summary row of `connector` in process `name`'s log.
    pub(crate) fn counts_in(&self, name: &str, connector: &str) -> Vec<u64> {
        let log = self.log(name);
        let row = log
            .lines()
            .find(|l| l.split_whitespace().next() == Some(connector))
            .unwrap_or_else(|| panic!("no summary row for {connector}:\n{log}"));
        row.split_whitespace()
            .skip(2)
            .take(6)
            .map(|n| n.parse().expect("a count"))
            .collect()
    }

    /// The id of the run whose summary `run.log` shows.
    fn run_id(&self) -> String {
        let log = self.log("run");
        log.lines()
            .find_map(|l| l.strip_prefix("Run ")?.split(':').next())
            .unwrap_or_else(|| panic!("no summary:\n{log}"))
            .to_owned()
    }

    /// Lines the indexers recorded so far.
    pub(crate) fn indexed(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for entry in std::fs::read_dir(self.dir.path().join("out")).expect("out") {
            let text = std::fs::read_to_string(entry.expect("entry").path()).unwrap_or_default();
            lines.extend(text.lines().map(str::to_owned));
        }
        lines
    }

    pub(crate) fn wait_until_indexed(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.indexed().len() < count {
            assert!(
                Instant::now() < deadline,
                "no progress:\n{}",
                self.log("run")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn signal(process: &Proc, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &process.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// A Kafka-mode config: `connector` (a test-connector config), `stages`,
/// and extra `[kafka]`, `[runner]` and `[indexer]` lines.
pub(crate) fn kafka_config(
    connector: &str,
    stages: &str,
    kafka: &str,
    runner: &str,
    indexer: &str,
) -> String {
    format!(
        r#"
        [runner]
        connector_timeout = "600s"
        cache_dir = {{cache}}
        {runner}
        [worker]
        threads = 2
        [kafka]
        bootstrap_servers = {{bootstrap}}
        topic_partitions = 6
        heartbeat_interval = "500ms"
        consumer = {{ "session.timeout.ms" = "6000", "heartbeat.interval.ms" = "1000" }}
        {kafka}
        [indexer]
        batch_size = 50
        batch_timeout = "20ms"
        {indexer}
        [[connectors]]
        name = "docs"
        pipeline = "{{pipeline}}"
        plugin = {{ path = @test-connector, config = {connector} }}
        [[pipelines]]
        name = "{{pipeline}}"
        stages = [{stages}]
        "#
    )
}

pub(crate) const RECORDING_INDEXER: &str = r#"plugin = { path = @test-indexer, config = { record = "/out/indexed.jsonl" }, grants = { dirs = [{ host = {out}, guest = "/out", writable = true }] } }"#;

#[test]
fn a_document_over_the_topics_message_limit_fails_alone() {
    // The broker takes at most 64 KiB on these topics, far below
    // kafka.max_message_bytes: the worker reads the limit from the broker.
    let setup = Setup::new(
        "limit",
        &kafka_config(
            r#"{ docs = [{ id = "small-1", action = "ok" }, { id = "large", action = "grow", count = "1" }, { id = "small-2", action = "ok" }] }"#,
            r#"{ name = "hostile", plugin = { path = @hostile-stage } }"#,
            r#"topic_config = { "max.message.bytes" = "65536" }"#,
            "",
            "plugin = { path = @test-indexer }",
        ),
    );
    let (mut worker, mut indexer) = (
        setup.start("worker", &["worker"], &[]),
        setup.start("indexer", &["indexer"], &[]),
    );
    let mut run = setup.run_kafka();
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(120)),
        3,
        "{}",
        setup.log("run")
    );
    assert_eq!(setup.counts("docs")[..4], [3, 0, 2, 1]);
    let log = setup.log("worker");
    assert!(
        log.contains("the broker accepts smaller messages") && log.contains("65536"),
        "the worker read the broker's limit:\n{log}"
    );
    assert!(!log.contains("delivery to"), "no delivery failed:\n{log}");
    // The run's event topic went with the run.
    let topic = format!("{}_event_{}", setup.pipeline, setup.run_id());
    let consumer: BaseConsumer = client(&setup).create().expect("consumer");
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumer
        .fetch_metadata(Some(&topic), Duration::from_secs(10))
        .expect("metadata")
        .topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none())
    {
        assert!(Instant::now() < deadline, "{topic} was not deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(worker.stop() && indexer.stop(), "both stop cleanly");
}

#[test]
fn a_worker_that_cannot_hand_a_document_on_stops_and_its_records_are_redelivered() {
    // The worker's producer refuses messages over 1,000 bytes (the broker
    // would take them): producing fails, and the worker must stop rather
    // than skip the documents.
    let body = kafka_config(
        "{ count = 20, pad = 2000 }",
        r#"{ name = "copy", plugin = { path = @copy-fields, config = { mappings = [{ source = "n", target = "m" }] } } }"#,
        "",
        r#"liveness_timeout = "4s""#,
        RECORDING_INDEXER,
    );
    let setup = Setup::new("refused", &body);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let strict = [(
        "WEIR__KAFKA__PRODUCER__MESSAGE.MAX.BYTES",
        r#""1000""#.to_owned(),
    )];
    let mut worker = setup.start("worker", &["worker"], &strict);
    let mut run = setup.run_kafka();
    assert_eq!(
        setup.exit_code_of(&mut worker, Duration::from_secs(60)),
        1,
        "{}",
        setup.log("worker")
    );
    assert!(
        setup.log("worker").contains("cannot produce"),
        "{}",
        setup.log("worker")
    );
    // Nobody processes the pipeline any more: the run ends stalled, naming
    // what is pending, long before its connector timeout.
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no live worker serves pipeline") && log.contains("doc-"),
        "{log}"
    );
    assert!(setup.indexed().is_empty(), "nothing was skipped past");
    // A worker that can produce gets every record again.
    let mut fixed = setup.start("worker-2", &["worker"], &[]);
    setup.wait_until_indexed(20);
    assert!(fixed.stop() && indexer.stop());
}

#[test]
fn parents_never_complete_a_run_before_their_children_are_indexed() {
    // Children spread over six partitions and two indexers, through a slow
    // stage; the run's Success must mean every child is indexed.
    let parents: Vec<String> = (0..6)
        .map(|i| format!(r#"{{ id = "p{i}", action = "children", count = "25" }}"#))
        .collect();
    let setup = Setup::new(
        "children",
        &kafka_config(
            &format!("{{ docs = [{}] }}", parents.join(", ")),
            r#"{ name = "make", plugin = { path = @hostile-stage } },
               { name = "done", plugin = { path = @rename-fields, config = { mappings = [{ source = "action", target = "made" }] } } },
               { name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 2000 } } }"#,
            "delete_event_topics = false",
            "",
            RECORDING_INDEXER,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let indexers: Vec<Proc> = (0..2)
        .map(|i| {
            setup.start(
                &format!("indexer-{i}"),
                &["indexer"],
                &[(
                    "WEIR__INDEXER__PLUGIN__CONFIG__RECORD",
                    format!("/out/indexer-{i}.jsonl"),
                )],
            )
        })
        .collect();
    for trial in 0..3 {
        for file in std::fs::read_dir(setup.dir.path().join("out")).expect("out") {
            std::fs::remove_file(file.expect("file").path()).expect("remove");
        }
        let mut run = setup.run_kafka();
        assert_eq!(
            setup.exit_code(&mut run, Duration::from_secs(120)),
            0,
            "trial {trial}: {}",
            setup.log("run")
        );
        let indexed = setup.indexed().len();
        assert_eq!(
            indexed,
            6 * 26,
            "trial {trial}: the run succeeded with {indexed} of 156 documents indexed"
        );
        assert_eq!(setup.counts("docs"), [6, 150, 156, 0, 0, 0]);
    }
    // The events of the last run: each parent's FINISH names the pass that
    // made its children, and comes after its 25 CREATEs.
    let run_id = setup.run_id();
    let mut creates: HashMap<u64, u32> = HashMap::new();
    let mut finishes: Vec<(String, u64, u64)> = Vec::new();
    read_until(&setup, &format!("{}_event_{run_id}", setup.pipeline), |m| {
        let events: serde_json::Value =
            serde_json::from_slice(m.payload().unwrap_or_default()).expect("events");
        for e in events.as_array().expect("an array") {
            let id = e["document_id"].as_str().expect("id");
            match (e["kind"].as_str(), id.contains("-child-")) {
                (Some("CREATE"), _) => {
                    *creates
                        .entry(e["attempt"].as_u64().expect("a CREATE names its pass"))
                        .or_default() += 1;
                }
                (Some("FINISH"), false) => finishes.push((
                    id.to_owned(),
                    e["attempt"].as_u64().expect("the parent's pass"),
                    e["after_creates"].as_u64().expect("its CREATE count"),
                )),
                _ => {}
            }
        }
        finishes.len() >= 6
    });
    for (parent, attempt, after) in &finishes {
        assert_eq!(*after, 25, "{parent}");
        assert_eq!(
            creates.get(attempt),
            Some(&25),
            "{parent}'s pass made 25 children"
        );
    }
    assert!(worker.stop());
    for mut indexer in indexers {
        assert!(indexer.stop());
    }
}

fn client(setup: &Setup) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", kafka_bootstrap())
        .set("group.id", format!("test-{}", setup.pipeline))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    c
}

/// Read `topic` until `found` says it has what it needs (at most a minute).
fn read_until(
    setup: &Setup,
    topic: &str,
    mut found: impl FnMut(&rdkafka::message::BorrowedMessage<'_>) -> bool,
) {
    let consumer: BaseConsumer = client(setup).create().expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "nothing expected arrived on {topic}"
        );
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200))
            && !is_journal(&message)
            && found(&message)
        {
            return;
        }
    }
}

/// Whether `message` is the runner's journal, not events (kafka.md).
fn is_journal(message: &rdkafka::message::BorrowedMessage<'_>) -> bool {
    message
        .headers()
        .is_some_and(|h| h.iter().any(|h| h.key == "weir.journal"))
}

#[test]
fn a_message_that_is_not_a_document_fails_its_id_and_is_dead_lettered() {
    let setup = Setup::new(
        "garbage",
        &kafka_config(
            "{ count = 1 }",
            "",
            r#"event_topic = "{pipeline}_events""#,
            "",
            "plugin = { path = @test-indexer }",
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let producer: BaseProducer = client(&setup).create().expect("producer");
    for (topic, key) in [("source", "bad-source"), ("dest", "bad-dest")] {
        let headers = OwnedHeaders::new().insert(Header {
            key: "weir.run_id",
            value: Some("run-7"),
        });
        let topic = format!("{}_{topic}", setup.pipeline);
        producer
            .send(
                BaseRecord::to(&topic)
                    .key(key)
                    .payload("{not json")
                    .headers(headers),
            )
            .expect("produce");
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    let mut failed: Vec<String> = Vec::new();
    read_until(&setup, &format!("{}_events", setup.pipeline), |m| {
        let events: serde_json::Value =
            serde_json::from_slice(m.payload().unwrap_or_default()).expect("events");
        for e in events.as_array().expect("an array") {
            assert_eq!(e["kind"], "FAIL", "{e}");
            assert_eq!(e["run_id"], "run-7", "{e}");
            assert!(
                e["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("not a Weir document"),
                "{e}"
            );
            failed.push(e["document_id"].as_str().expect("id").to_owned());
        }
        failed.len() >= 2
    });
    failed.sort();
    assert_eq!(failed, ["bad-dest", "bad-source"]);
    let mut dead: Vec<String> = Vec::new();
    read_until(&setup, &format!("{}_fail", setup.pipeline), |m| {
        let error = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == "weir.error"))
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        assert!(error.contains("not a Weir document"), "{error}");
        assert_eq!(
            m.payload(),
            Some(&b"{not json"[..]),
            "the bytes as they came"
        );
        dead.push(String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned());
        dead.len() >= 2
    });
    assert!(worker.stop() && indexer.stop());
}

#[test]
fn a_pipeline_nobody_serves_ends_stalled_naming_what_is_pending() {
    // An indexer, but no worker.
    let setup = Setup::new(
        "unserved",
        &kafka_config(
            "{ count = 30 }",
            "",
            "",
            r#"liveness_timeout = "3s""#,
            "plugin = { path = @test-indexer }",
        ),
    );
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no live worker serves pipeline")
            && log.contains("with 30 documents pending (first: doc-0, doc-1")
            && log.contains("indexer ")
            && log.contains("serving"),
        "{log}"
    );
    assert!(indexer.stop());
}

#[test]
fn a_worker_killed_and_never_restarted_ends_the_run_stalled() {
    let setup = Setup::new(
        "killed",
        &kafka_config(
            "{ count = 400 }",
            r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 20000 } } }"#,
            "",
            r#"liveness_timeout = "4s""#,
            RECORDING_INDEXER,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    setup.wait_until_indexed(20);
    worker.kill_hard();
    let killed = Instant::now();
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no live worker serves pipeline")
            && log.contains("documents pending (first: doc-")
            && log.contains("worker ")
            && log.contains("last heard"),
        "{log}"
    );
    let noticed = killed.elapsed();
    println!(
        "a killed worker noticed {noticed:?} after the kill (liveness timeout 4 s; connector timeout 600 s)"
    );
    // Its silence counts from its last heartbeat, not from when the runner
    // first missed it (which doubled the timeout), and the log says how long.
    assert!(noticed < Duration::from_secs(8), "{noticed:?}");
    assert!(
        log.contains("none heard from for 4s") || log.contains("none heard from for 5s"),
        "{log}"
    );
    assert!(indexer.stop());
}

#[test]
fn sigint_stops_a_kafka_run_after_its_documents_in_flight() {
    let setup = Setup::new(
        "sigint_kafka",
        &kafka_config(
            "{ count = 300 }",
            r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 10000 } } }"#,
            "",
            r#"grace_period = "120s""#,
            RECORDING_INDEXER,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    setup.wait_until_indexed(10);
    signal(&run, "INT");
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(120)),
        130,
        "{}",
        setup.log("run")
    );
    let counts = setup.counts("docs");
    assert_eq!(
        counts[0], counts[2],
        "everything published finished within the grace period: {counts:?}"
    );
    assert!(
        setup.log("run").contains("Interrupted"),
        "{}",
        setup.log("run")
    );
    assert!(worker.stop() && indexer.stop());
}

#[test]
fn sigterm_to_an_indexer_during_a_backend_outage_leaves_its_batch_for_the_next() {
    // The backend refuses every batch as unreachable; the indexer retries.
    let setup = Setup::new(
        "outage",
        &kafka_config(
            "{ count = 40 }",
            "",
            "",
            "",
            r#"max_retries = 1000
            retry_backoff = "50ms"
            retry_max_backoff = "200ms"
            plugin = { path = @test-indexer, config = { batch_failures = 1000000, connection_failed = true, record = "/out/indexed.jsonl" }, grants = { dirs = [{ host = {out}, guest = "/out", writable = true }] } }"#,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    assert!(
        indexer.wait_for_log(
            &setup.log_path("indexer"),
            "batch failed",
            3,
            Duration::from_secs(60)
        ),
        "{}",
        setup.log("indexer")
    );
    assert!(indexer.stop(), "{}", setup.log("indexer"));
    assert!(
        setup.log("indexer").contains("left to be redelivered"),
        "{}",
        setup.log("indexer")
    );
    // The backend is back: the next indexer gets the batch, nothing failed.
    let mut next = setup.start(
        "indexer-2",
        &["indexer"],
        &[("WEIR__INDEXER__PLUGIN__CONFIG__BATCH_FAILURES", "0".into())],
    );
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(120)),
        0,
        "{}",
        setup.log("run")
    );
    assert_eq!(setup.counts("docs")[..5], [40, 0, 40, 0, 0]);
    assert!(worker.stop() && next.stop());
}

#[test]
fn a_lost_broker_is_logged_once_not_on_every_poll() {
    let setup = Setup::new(
        "lost",
        &kafka_config(
            "{ count = 1 }",
            "",
            "",
            "",
            "plugin = { path = @test-indexer }",
        )
        .replace(
            "bootstrap_servers = {bootstrap}",
            r#"bootstrap_servers = "127.0.0.1:1""#,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let log = setup.log_path("worker");
    assert!(
        worker.wait_for_log(&log, "waiting for Kafka", 1, Duration::from_secs(90)),
        "a serving process waits for the cluster:\n{}",
        setup.log("worker")
    );
    // Three more seconds of retries (librdkafka reconnects every few ms).
    assert!(!worker.wait_for_log(&log, "not a line it writes", 1, Duration::from_secs(3)));
    let text = setup.log("worker");
    let errors = text.lines().filter(|l| l.contains("ERROR")).count();
    assert_eq!(errors, 1, "one line for the outage:\n{text}");
    assert!(text.contains("lost Kafka"), "{text}");
    assert!(worker.stop(), "it stops while waiting:\n{text}");
}

#[test]
fn sigint_stops_a_local_run_after_its_queued_documents() {
    let setup = Setup::new(
        "sigint_local",
        r#"
        [runner]
        cache_dir = {cache}
        log_interval = "1s"
        grace_period = "60s"
        [publisher]
        queue_capacity = 10
        [worker]
        threads = 2
        [indexer]
        batch_size = 5
        batch_timeout = "10ms"
        plugin = { path = @test-indexer }
        [[connectors]]
        name = "docs"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 5000 } }
        [[pipelines]]
        name = "p"
        stages = [{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 5000 } } }]
        "#,
    );
    let mut run = setup.start("run", &["run", "--no-progress"], &[]);
    let log = setup.log_path("run");
    assert!(run.wait_for_log(&log, "docs indexed", 2, Duration::from_secs(60)));
    signal(&run, "INT");
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(60)),
        130,
        "{}",
        setup.log("run")
    );
    let counts = setup.counts("docs");
    assert!(counts[0] < 5000, "the connector stopped: {counts:?}");
    assert_eq!(
        counts[0], counts[2],
        "every queued document finished within the grace period: {counts:?}"
    );
    assert!(
        setup.log("run").contains("INTERRUPTED"),
        "{}",
        setup.log("run")
    );
}

#[test]
fn a_second_sigint_stops_a_run_at_once() {
    let setup = Setup::new(
        "sigint_twice",
        r#"
        [runner]
        cache_dir = {cache}
        log_interval = "1s"
        grace_period = "600s"
        [publisher]
        queue_capacity = 200
        [worker]
        threads = 1
        [indexer]
        plugin = { path = @test-indexer }
        [[connectors]]
        name = "docs"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 1000 } }
        [[pipelines]]
        name = "p"
        stages = [{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 100000 } } }]
        "#,
    );
    let mut run = setup.start("run", &["run", "--no-progress"], &[]);
    let log = setup.log_path("run");
    assert!(run.wait_for_log(&log, "docs indexed", 1, Duration::from_secs(60)));
    signal(&run, "INT");
    assert!(run.wait_for_log(&log, "interrupted:", 1, Duration::from_secs(10)));
    signal(&run, "INT");
    // 200 queued documents at 100 ms each would take 20 s of grace.
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(5)), 130);
    assert!(setup.log("run").contains("stopping at once"));
}

#[test]
fn documents_that_never_finish_end_a_local_run_stalled() {
    // The backend is down for good and the indexer retries without end:
    // nothing finishes, and the run says so instead of waiting a day.
    let setup = Setup::new(
        "stalled",
        r#"
        [runner]
        cache_dir = {cache}
        stall_timeout = "3s"
        [indexer]
        max_retries = 1000000
        retry_backoff = "20ms"
        retry_max_backoff = "100ms"
        plugin = { path = @test-indexer, config = { batch_failures = 1000000, connection_failed = true }, limits = { call_timeout = "1s" } }
        [[connectors]]
        name = "docs"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 12 } }
        [[pipelines]]
        name = "p"
        "#,
    );
    let mut run = setup.start("run", &["run", "--no-progress"], &[]);
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no document finished for 3s with 12 documents pending (first: doc-0, doc-1, doc-10"),
        "{log}"
    );
}

#[test]
fn a_document_that_kills_its_worker_is_quarantined_after_max_deliveries() {
    // `poison` is published first (the first record of its partition); a
    // worker taking it sleeps in the stage and is killed there, as if the
    // document had crashed it.
    let setup = Setup::new(
        "poison",
        &kafka_config(
            r#"{ docs = [{ id = "poison", action = "sleep", millis = "600000" }], count = 30 }"#,
            r#"{ name = "hostile", plugin = { path = @hostile-stage } }"#,
            "max_deliveries = 2",
            "",
            RECORDING_INDEXER,
        ),
    );
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    // Two worker threads: a process that dies also leaves the record its
    // other thread had in hand unfinished. Those bystanders must not be
    // quarantined: past max_deliveries a record gets one delivery alone in
    // its process, and only one that dies alone too is set aside.
    let two_threads = [("WEIR__WORKER__THREADS", "2".to_owned())];
    for delivery in 1..=3 {
        let name = format!("worker-{delivery}");
        let mut worker = setup.start(&name, &["worker"], &two_threads);
        assert!(
            worker.wait_for_log(
                &setup.log_path(&name),
                "sleeping on poison",
                1,
                Duration::from_secs(120)
            ),
            "delivery {delivery}:\n{}",
            setup.log(&name)
        );
        worker.kill_hard();
    }
    assert!(
        setup.log("worker-3").contains("processed alone"),
        "{}",
        setup.log("worker-3")
    );
    // The fourth worker sets it aside without processing it.
    let mut worker = setup.start("worker-4", &["worker"], &two_threads);
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(180)),
        3,
        "{}",
        setup.log("run")
    );
    let log = setup.log("worker-4");
    assert!(
        log.contains("quarantined") && !log.contains("sleeping on poison"),
        "{log}"
    );
    assert_eq!(setup.counts("docs")[..4], [31, 0, 30, 1]);
    let indexed = setup.indexed();
    assert!(!indexed.iter().any(|l| l.contains("\"poison\"")));
    // On the fail topic, as it came, with why.
    let consumer: BaseConsumer = client(&setup)
        .set("group.id", format!("check-{}", setup.pipeline))
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer
        .subscribe(&[&format!("{}_fail", setup.pipeline)])
        .expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(60);
    let letter = loop {
        assert!(Instant::now() < deadline, "no dead letter");
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(500)) {
            break message.detach();
        }
    };
    assert_eq!(letter.key(), Some(&b"poison"[..]));
    let error = letter
        .headers()
        .and_then(|h| {
            h.iter()
                .find(|h| h.key == "weir.error")
                .and_then(|h| h.value)
        })
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default();
    assert!(
        error.contains("delivered 3 times") && error.contains("the last time alone"),
        "{error}"
    );
    // Only the culprit is on the fail topic.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            panic!(
                "a bystander was set aside: {:?}",
                message.key().map(String::from_utf8_lossy)
            );
        }
    }
    assert!(worker.stop() && indexer.stop());
}

#[test]
fn replay_reads_a_pipelines_fail_topic_back_through_a_pipeline() {
    let body = kafka_config(
        r#"{ docs = [{ id = "x", action = "fail", n = 7 }, { id = "y", action = "ok" }] }"#,
        r#"{ name = "hostile", plugin = { path = @hostile-stage } }"#,
        "",
        "",
        RECORDING_INDEXER,
    ) + "\n[[pipelines]]\nname = \"fixed\"\n";
    let setup = Setup::new("replay", &body);
    let (mut worker, mut indexer) = (
        setup.start("worker", &["worker"], &[]),
        setup.start("indexer", &["indexer"], &[]),
    );
    let mut run = setup.run_kafka();
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(120)),
        3,
        "{}",
        setup.log("run")
    );
    assert!(worker.stop() && indexer.stop());
    // `x` is on the fail topic; a pipeline without the failing stage takes it.
    let mut replay = setup.start(
        "replay",
        &[
            "replay",
            "--no-progress",
            "--fail-topic",
            &setup.pipeline,
            "--pipeline",
            "fixed",
        ],
        &[],
    );
    assert_eq!(
        setup.exit_code_of(&mut replay, Duration::from_secs(120)),
        0,
        "{}",
        setup.log("replay")
    );
    assert!(
        setup.log("replay").contains("replaying 1 dead letter"),
        "{}",
        setup.log("replay")
    );
    let replayed: Vec<String> = setup
        .indexed()
        .into_iter()
        .filter(|l| l.contains("\"x\""))
        .collect();
    assert_eq!(replayed.len(), 1, "{replayed:?}");
}
