//! Run accounting that always ends with the truth, on a real broker and in
//! local mode: documents too large for a topic fail alone, a worker that
//! cannot hand a document on stops (and its records are redelivered),
//! parents never complete before their children, messages that are not
//! documents fail their id, runs that cannot finish end stalled instead of
//! waiting out their timeout, and signals stop runs and indexers gracefully.
//! One file per topic; the setup and helpers they share are here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use weir_tests::{Proc, kafka_bootstrap, with_plugins};

mod redelivery;
mod signals;
mod stalls;
mod topics;

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
