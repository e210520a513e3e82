//! The run configuration: one TOML file.
//!
//! ```toml
//! [worker]
//! threads = 4
//!
//! [[connectors]]
//! name = "books"
//! pipeline = "books"
//! plugin = { path = "plugins/file_connector.wasm", config = { paths = ["/data/books.jsonl"] } }
//!
//! [[pipelines]]
//! name = "books"
//! stages = [
//!   { name = "trim", plugin = { path = "plugins/trim_whitespace.wasm" } },
//! ]
//!
//! [indexer]
//! plugin = { path = "plugins/jsonl_indexer.wasm", config = { path = "/out/books.jsonl" } }
//! ```
//!
//! A pipeline may have its own `indexer` table, used instead of `[indexer]`.
//!
//! Relative paths (plugin files, granted directories) are relative to the
//! config file. Any setting outside `connectors` and `pipelines` can be
//! overridden from the environment: `WEIR__WORKER__THREADS=8` sets
//! `worker.threads` (sections and keys joined with `__`). A config may
//! `include` others and use `${VAR}` / `${VAR:-default}` in its strings
//! (see `config/vars.rs`), so one config serves many runs.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plugin::PluginSpec;

mod shape;
mod vars;

/// The prefix of environment overrides.
pub const ENV_PREFIX: &str = "WEIR__";

/// A whole run configuration.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How runs are driven.
    #[serde(default)]
    pub runner: RunnerConfig,
    /// How connectors hand documents to workers.
    #[serde(default)]
    pub publisher: PublisherConfig,
    /// The workers that run pipelines.
    #[serde(default)]
    pub worker: WorkerConfig,
    /// Connectors, run one after the other in this order.
    pub connectors: Vec<ConnectorConfig>,
    /// Pipelines of stages, named by connectors.
    #[serde(default)]
    pub pipelines: Vec<PipelineConfig>,
    /// The indexer pipelines feed, unless a pipeline names its own.
    #[serde(default)]
    pub indexer: Option<IndexerConfig>,
    /// Where a local run keeps the documents that failed (Kafka and Hybrid
    /// modes put them on `<pipeline>_fail`).
    #[serde(default)]
    pub dead_letters: DeadLetterConfig,
    /// How Kafka mode reaches the cluster (`weir run --mode kafka`,
    /// `weir worker`, `weir indexer`).
    #[serde(default)]
    pub kafka: Option<KafkaConfig>,
    /// Where this process serves `/metrics`, `/healthz` and `/readyz`.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Tenants: each groups pipelines and gives default limits to their
    /// plugins (stages, the connectors that feed them, their own indexers).
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
}

/// `[dead_letters]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterConfig {
    /// Whether failed documents are kept at all. Default true.
    #[serde(default = "DeadLetterConfig::default_enabled")]
    pub enabled: bool,
    /// The JSON-lines file, relative to the config; `{run_id}` becomes the
    /// run's id. Made when the first document fails. Default
    /// `dead-letters/{run_id}.jsonl`.
    #[serde(default = "DeadLetterConfig::default_path")]
    pub path: PathBuf,
    /// An indexer plugin to send each dead letter to instead of the file
    /// (one document per letter: the letter's fields, the failed document
    /// under `document`). Should it fail, the letter goes to the file.
    #[serde(default)]
    pub plugin: Option<PluginSpec>,
}

impl DeadLetterConfig {
    fn default_enabled() -> bool {
        true
    }
    fn default_path() -> PathBuf {
        PathBuf::from("dead-letters/{run_id}.jsonl")
    }

    /// The file for run `run_id`.
    pub fn path_for(&self, run_id: &str) -> PathBuf {
        PathBuf::from(self.path.to_string_lossy().replace("{run_id}", run_id))
    }
}

impl Default for DeadLetterConfig {
    fn default() -> Self {
        Self {
            enabled: Self::default_enabled(),
            path: Self::default_path(),
            plugin: None,
        }
    }
}

/// `[metrics]`
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` to serve the Prometheus text format (`/metrics`) and the
    /// health endpoints on; none by default. `--metrics-addr` wins.
    #[serde(default)]
    pub addr: Option<String>,
}

/// `[[tenants]]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub name: String,
    /// The tenant's pipelines; a pipeline belongs to at most one tenant.
    pub pipelines: Vec<String>,
    /// Defaults for the limits its plugins leave unset (a plugin's own
    /// `limits` win). A top-level `[indexer]` is shared, so not the tenant's.
    #[serde(default)]
    pub limits: crate::plugin::Limits,
}

/// `[kafka]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// Brokers, `host:port[,host:port...]`. Default `127.0.0.1:9092`.
    #[serde(default = "KafkaConfig::default_bootstrap_servers")]
    pub bootstrap_servers: String,
    /// Consumer group of workers. Default `weir-<pipeline>-workers`.
    #[serde(default)]
    pub worker_group_id: Option<String>,
    /// Consumer group of indexers. Default `weir-<pipeline>-indexers`.
    #[serde(default)]
    pub indexer_group_id: Option<String>,
    /// Longest a consumer may go between polls before the group drops it
    /// (`max.poll.interval.ms`); longer than any document takes. Default 10 min.
    #[serde(
        default = "KafkaConfig::default_max_poll_interval",
        with = "humantime_serde"
    )]
    pub max_poll_interval: Duration,
    /// Largest message produced or fetched, in bytes. Default 10 MiB.
    #[serde(default = "KafkaConfig::default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// The source topic instead of `<pipeline>_source` (letters, digits, `.`, `_`, `-`).
    #[serde(default)]
    pub source_topic: Option<String>,
    /// One fixed event topic instead of `<pipeline>_event_<run id>`: for
    /// streaming only (no runner counting events), never with `weir run`.
    #[serde(default)]
    pub event_topic: Option<String>,
    /// Partitions of the source, destination and fail topics that Weir
    /// creates when they are missing. Unset: Weir creates none of them (the
    /// broker may auto-create them with its default partition count).
    #[serde(default)]
    pub topic_partitions: Option<u32>,
    /// Whether workers and indexers send lifecycle events. Default true.
    #[serde(default = "KafkaConfig::default_events")]
    pub events: bool,
    /// Deliveries of a source record whose worker never finished it (the
    /// process died on it: an abort, an out-of-memory kill) before the next
    /// worker quarantines it to `<pipeline>_fail` unprocessed. 0: never.
    /// Default 3.
    #[serde(default = "KafkaConfig::default_max_deliveries")]
    pub max_deliveries: u32,
    /// Topic settings for the topics Weir creates (e.g. `retention.ms`,
    /// `max.message.bytes`).
    #[serde(default)]
    pub topic_config: BTreeMap<String, String>,
    /// How often `weir worker`, `weir indexer` and `weir worker-indexer`
    /// announce themselves on `<pipeline>_heartbeat`, for runners to see who
    /// serves a pipeline. Default 2 s.
    #[serde(
        default = "KafkaConfig::default_heartbeat_interval",
        with = "humantime_serde"
    )]
    pub heartbeat_interval: Duration,
    /// Whether `weir run` deletes its event topics when the run ends. Default true.
    #[serde(default = "KafkaConfig::default_events")]
    pub delete_event_topics: bool,
    /// librdkafka properties for every client (e.g. `security.protocol`, `sasl.*`, `ssl.*`).
    #[serde(default)]
    pub client: BTreeMap<String, String>,
    /// librdkafka properties for producers only.
    #[serde(default)]
    pub producer: BTreeMap<String, String>,
    /// librdkafka properties for consumers only.
    #[serde(default)]
    pub consumer: BTreeMap<String, String>,
    /// librdkafka properties for the admin client only.
    #[serde(default)]
    pub admin: BTreeMap<String, String>,
}

impl KafkaConfig {
    fn default_bootstrap_servers() -> String {
        "127.0.0.1:9092".into()
    }
    fn default_max_poll_interval() -> Duration {
        Duration::from_secs(600)
    }
    fn default_max_message_bytes() -> usize {
        10 << 20
    }
    fn default_events() -> bool {
        true
    }
    fn default_heartbeat_interval() -> Duration {
        Duration::from_secs(2)
    }
    fn default_max_deliveries() -> u32 {
        3
    }

    /// Settings with defaults for `bootstrap_servers`.
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            worker_group_id: None,
            indexer_group_id: None,
            max_poll_interval: Self::default_max_poll_interval(),
            max_message_bytes: Self::default_max_message_bytes(),
            source_topic: None,
            event_topic: None,
            topic_partitions: None,
            events: Self::default_events(),
            topic_config: BTreeMap::new(),
            heartbeat_interval: Self::default_heartbeat_interval(),
            max_deliveries: Self::default_max_deliveries(),
            delete_event_topics: Self::default_events(),
            client: BTreeMap::new(),
            producer: BTreeMap::new(),
            consumer: BTreeMap::new(),
            admin: BTreeMap::new(),
        }
    }

    /// Problems with these settings.
    fn check(&self, errors: &mut Vec<ConfigError>) {
        let safe = |t: &str| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        };
        for (key, topic) in [
            ("kafka.source_topic", &self.source_topic),
            ("kafka.event_topic", &self.event_topic),
        ] {
            if let Some(topic) = topic
                && !safe(topic)
            {
                errors.push(error(
                    key,
                    format!("`{topic}` may only hold letters, digits, `.`, `_` and `-`"),
                ));
            }
        }
        if self.bootstrap_servers.trim().is_empty() {
            errors.push(error(
                "kafka.bootstrap_servers",
                "must name at least one broker",
            ));
        }
        if self.topic_partitions == Some(0) {
            errors.push(error("kafka.topic_partitions", "must be at least 1"));
        }
        if self.heartbeat_interval.is_zero() {
            errors.push(error("kafka.heartbeat_interval", "must be more than zero"));
        }
        if self.max_message_bytes < 1024 {
            errors.push(error("kafka.max_message_bytes", "must be at least 1024"));
        }
    }
}

/// `[runner]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerConfig {
    /// Longest one connector may take, from start until its last document is
    /// indexed; then the run fails. Default one day.
    #[serde(
        default = "RunnerConfig::default_connector_timeout",
        with = "humantime_serde"
    )]
    pub connector_timeout: Duration,
    /// How often throughput lines are logged. Default 30 s.
    #[serde(
        default = "RunnerConfig::default_log_interval",
        with = "humantime_serde"
    )]
    pub log_interval: Duration,
    /// How long documents may be pending with none of them finishing before
    /// the run ends as stalled (status Failure, naming pending ids). Longer
    /// than one document can take. Default 5 min.
    #[serde(
        default = "RunnerConfig::default_stall_timeout",
        with = "humantime_serde"
    )]
    pub stall_timeout: Duration,
    /// Kafka mode: how long documents may be pending while no live worker or
    /// no live indexer serves their pipeline (no heartbeat) before the run
    /// ends as stalled. Default 30 s.
    #[serde(
        default = "RunnerConfig::default_liveness_timeout",
        with = "humantime_serde"
    )]
    pub liveness_timeout: Duration,
    /// After SIGINT/SIGTERM, how long `weir run` waits for documents in
    /// flight before it stops (a second signal stops at once). Default 30 s.
    #[serde(
        default = "RunnerConfig::default_grace_period",
        with = "humantime_serde"
    )]
    pub grace_period: Duration,
    /// Where compiled plugins are cached. Default `$WEIR_CACHE_DIR`, else the
    /// user cache directory.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Most the cache of compiled plugins may hold, in MiB (default 2048);
    /// the least recently used entries are removed past it.
    #[serde(default = "RunnerConfig::default_cache_max_mib")]
    pub cache_max_mib: u64,
}

impl RunnerConfig {
    fn default_connector_timeout() -> Duration {
        Duration::from_secs(24 * 60 * 60)
    }
    fn default_log_interval() -> Duration {
        Duration::from_secs(30)
    }
    fn default_stall_timeout() -> Duration {
        Duration::from_secs(300)
    }
    fn default_liveness_timeout() -> Duration {
        Duration::from_secs(30)
    }
    fn default_grace_period() -> Duration {
        Duration::from_secs(30)
    }
    fn default_cache_max_mib() -> u64 {
        crate::plugin::DEFAULT_CACHE_MAX_MIB
    }
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            connector_timeout: Self::default_connector_timeout(),
            log_interval: Self::default_log_interval(),
            stall_timeout: Self::default_stall_timeout(),
            liveness_timeout: Self::default_liveness_timeout(),
            grace_period: Self::default_grace_period(),
            cache_dir: None,
            cache_max_mib: Self::default_cache_max_mib(),
        }
    }
}

/// `[publisher]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PublisherConfig {
    /// Documents each in-memory queue holds before senders block. Default 10,000.
    #[serde(default = "PublisherConfig::default_queue_capacity")]
    pub queue_capacity: usize,
    /// MiB of documents each in-memory queue holds before senders block; a
    /// larger document goes alone. Default 256.
    #[serde(default = "PublisherConfig::default_queue_max_mib")]
    pub queue_max_mib: usize,
    /// Most documents connectors publish per second, all together; no
    /// ceiling by default.
    #[serde(default)]
    pub max_docs_per_second: Option<u32>,
}

impl PublisherConfig {
    fn default_queue_capacity() -> usize {
        10_000
    }
    fn default_queue_max_mib() -> usize {
        256
    }
    /// [`PublisherConfig::queue_max_mib`] in bytes.
    pub fn queue_max_bytes(&self) -> usize {
        self.queue_max_mib.saturating_mul(1 << 20)
    }
}

impl Default for PublisherConfig {
    fn default() -> Self {
        Self {
            queue_capacity: Self::default_queue_capacity(),
            queue_max_mib: Self::default_queue_max_mib(),
            max_docs_per_second: None,
        }
    }
}

/// `[worker]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// Worker threads per pipeline, each with its own plugin instances.
    /// Default: the number of CPUs.
    #[serde(default = "WorkerConfig::default_threads")]
    pub threads: usize,
    /// Retries of a stage call that failed in a way that may pass later: the
    /// stage said `transient` (or, with `retry_traps`, it trapped or ran out
    /// of time). The same call is made again, on the document as the stage
    /// left it, after a backoff; the worker's other documents wait, so an
    /// id's versions stay in order. Default 3.
    #[serde(default = "WorkerConfig::default_max_retries")]
    pub max_retries: u32,
    /// First retry delay; doubled each attempt, with jitter. Default 100 ms.
    #[serde(
        default = "WorkerConfig::default_retry_backoff",
        with = "humantime_serde"
    )]
    pub retry_backoff: Duration,
    /// Longest retry delay. Default 10 s.
    #[serde(
        default = "WorkerConfig::default_retry_max_backoff",
        with = "humantime_serde"
    )]
    pub retry_max_backoff: Duration,
    /// Also retry a call that trapped (a panic, a limit) or ran past its
    /// deadline, on a fresh instance. Default false: those fail the document.
    #[serde(default)]
    pub retry_traps: bool,
}

impl WorkerConfig {
    fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }
    fn default_max_retries() -> u32 {
        3
    }
    fn default_retry_backoff() -> Duration {
        Duration::from_millis(100)
    }
    fn default_retry_max_backoff() -> Duration {
        Duration::from_secs(10)
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            threads: Self::default_threads(),
            max_retries: Self::default_max_retries(),
            retry_backoff: Self::default_retry_backoff(),
            retry_max_backoff: Self::default_retry_max_backoff(),
            retry_traps: false,
        }
    }
}

/// One `[[connectors]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectorConfig {
    /// Unique name, used in logs, metrics and the run summary.
    pub name: String,
    /// The pipeline its documents go through.
    pub pipeline: String,
    /// The connector component.
    pub plugin: PluginSpec,
}

/// One `[[pipelines]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    pub name: String,
    /// Stages, run in order on every document.
    #[serde(default)]
    pub stages: Vec<StageConfig>,
    /// This pipeline's own indexer, instead of the top-level `[indexer]`.
    #[serde(default)]
    pub indexer: Option<IndexerConfig>,
}

/// One stage of a pipeline.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StageConfig {
    /// Unique within its pipeline.
    pub name: String,
    pub plugin: PluginSpec,
}

/// `[indexer]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IndexerConfig {
    /// The indexer backend component.
    pub plugin: PluginSpec,
    /// Indexer instances, each on a thread of its own with its own batches,
    /// for a backend that takes writes from several clients (a file indexer
    /// then writes one file per instance: `{instance}` in its path). Each id
    /// goes to one instance, so its versions stay in order. In local mode,
    /// per run; in Kafka mode, per `weir indexer` process (each instance a
    /// consumer of the destination topic); Hybrid pairs have one each.
    /// Default 1, at most 64.
    #[serde(default = "IndexerConfig::default_instances")]
    pub instances: usize,
    /// Most documents in one batch. Default 100.
    #[serde(default = "IndexerConfig::default_batch_size")]
    pub batch_size: usize,
    /// A batch is sent when this long has passed since its last document was
    /// added. Default 100 ms.
    #[serde(
        default = "IndexerConfig::default_batch_timeout",
        with = "humantime_serde"
    )]
    pub batch_timeout: Duration,
    /// A batch is sent once its documents reach about this many bytes of JSON.
    /// Default 10 MiB.
    #[serde(default = "IndexerConfig::default_batch_max_bytes")]
    pub batch_max_bytes: usize,
    /// Retries of a batch that failed with a retryable status, and of each
    /// document the backend refused for now (transient, or a retryable
    /// status): it is sent again, with backoff, together with any later
    /// versions of its id in the batch. Default 3.
    #[serde(default = "IndexerConfig::default_max_retries")]
    pub max_retries: u32,
    /// First retry delay; doubled each attempt, with jitter. Default 100 ms.
    #[serde(
        default = "IndexerConfig::default_retry_backoff",
        with = "humantime_serde"
    )]
    pub retry_backoff: Duration,
    /// Longest retry delay. Default 10 s.
    #[serde(
        default = "IndexerConfig::default_retry_max_backoff",
        with = "humantime_serde"
    )]
    pub retry_max_backoff: Duration,
    /// Backend statuses worth retrying. A batch whose backend could not be
    /// reached at all is always retried. Default [429, 503].
    #[serde(default = "IndexerConfig::default_retryable_statuses")]
    pub retryable_statuses: Vec<u16>,
}

impl IndexerConfig {
    /// The most indexer instances one pipeline may have.
    pub const MAX_INSTANCES: usize = 64;

    fn default_instances() -> usize {
        1
    }
    fn default_batch_size() -> usize {
        100
    }
    fn default_batch_timeout() -> Duration {
        Duration::from_millis(100)
    }
    fn default_batch_max_bytes() -> usize {
        10 << 20
    }
    fn default_max_retries() -> u32 {
        3
    }
    fn default_retry_backoff() -> Duration {
        Duration::from_millis(100)
    }
    fn default_retry_max_backoff() -> Duration {
        Duration::from_secs(10)
    }
    fn default_retryable_statuses() -> Vec<u16> {
        vec![429, 503]
    }

    /// Settings with defaults around `plugin`.
    pub fn new(plugin: PluginSpec) -> Self {
        Self {
            plugin,
            instances: Self::default_instances(),
            batch_size: Self::default_batch_size(),
            batch_timeout: Self::default_batch_timeout(),
            batch_max_bytes: Self::default_batch_max_bytes(),
            max_retries: Self::default_max_retries(),
            retry_backoff: Self::default_retry_backoff(),
            retry_max_backoff: Self::default_retry_max_backoff(),
            retryable_statuses: Self::default_retryable_statuses(),
        }
    }
}

/// One problem in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where: a dotted path such as `pipelines.books.stages.trim.config.fields`.
    pub location: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.location, self.message)
        }
    }
}

/// Every problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} configuration error{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            writeln!(f, "  - {e}")?;
        }
        Ok(())
    }
}

fn error(location: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        location: location.into(),
        message: message.into(),
    }
}

impl Config {
    /// Read `path`, apply environment overrides, and resolve relative paths
    /// against the file's directory. Checks only the file's own shape; see
    /// [`Config::check`] and the runner's validation for the rest.
    pub fn load(path: &Path) -> Result<Self, ConfigErrors> {
        let table = vars::load_file(path).map_err(|e| ConfigErrors(vec![error("", e)]))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_table(table, base, std::env::vars())
    }

    /// Parse TOML `text`, with its includes relative to `base`, variables
    /// and overrides from `env` (pairs such as `("WEIR__WORKER__THREADS",
    /// "8")` or `("HOST", "search.local")`), resolving paths against `base`.
    pub fn parse(
        text: &str,
        base: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigErrors> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigErrors(vec![error("", e.to_string())]))?;
        let table = vars::with_includes(table, base)
            .map_err(|e| ConfigErrors(vec![error("include", e)]))?;
        Self::from_table(table, base, env)
    }

    fn from_table(
        mut table: toml::Table,
        base: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigErrors> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let lookup = |name: &str| {
            env.iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        let mut errors: Vec<ConfigError> = vars::substitute(&mut table, &lookup)
            .into_iter()
            .map(|(path, message)| error(path, message))
            .collect();
        for (key, value) in env {
            if let Some(path) = key.strip_prefix(ENV_PREFIX)
                && let Err(message) = apply_override(&mut table, path, &value)
            {
                errors.push(error(key, message));
            }
        }
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        let mut config: Config = match toml::Value::Table(table.clone()).try_into() {
            Ok(config) => config,
            Err(e) => {
                // serde stops at the first problem: list them all.
                let mut errors = shape::problems(&table);
                if errors.is_empty() {
                    errors.push(error("", e.message().trim()));
                }
                return Err(ConfigErrors(errors));
            }
        };
        config.resolve_paths(base);
        config.apply_tenant_limits();
        Ok(config)
    }

    /// Fill the limits the plugins of each tenant's pipelines leave unset
    /// from the tenant's.
    fn apply_tenant_limits(&mut self) {
        let tenants = std::mem::take(&mut self.tenants);
        for tenant in &tenants {
            let owns = |pipeline: &str| tenant.pipelines.iter().any(|p| p == pipeline);
            let connectors = self
                .connectors
                .iter_mut()
                .filter(|c| owns(&c.pipeline))
                .map(|c| &mut c.plugin);
            let pipelines = self
                .pipelines
                .iter_mut()
                .filter(|p| owns(&p.name))
                .flat_map(|p| {
                    p.stages
                        .iter_mut()
                        .map(|s| &mut s.plugin)
                        .chain(p.indexer.iter_mut().map(|i| &mut i.plugin))
                });
            for spec in connectors.chain(pipelines) {
                spec.limits = spec.limits.or(&tenant.limits);
                spec.tenant = Some(tenant.name.clone());
            }
        }
        self.tenants = tenants;
    }

    pub(crate) fn plugins_mut(&mut self) -> impl Iterator<Item = &mut PluginSpec> {
        self.connectors
            .iter_mut()
            .map(|c| &mut c.plugin)
            .chain(self.pipelines.iter_mut().flat_map(|p| {
                p.stages
                    .iter_mut()
                    .map(|s| &mut s.plugin)
                    .chain(p.indexer.iter_mut().map(|i| &mut i.plugin))
            }))
            .chain(self.indexer.iter_mut().map(|i| &mut i.plugin))
            .chain(self.dead_letters.plugin.iter_mut())
    }

    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(dir) = &mut self.runner.cache_dir {
            resolve(dir);
        }
        resolve(&mut self.dead_letters.path);
        for spec in self.plugins_mut() {
            resolve(&mut spec.path);
            for dir in &mut spec.grants.dirs {
                resolve(&mut dir.host);
            }
        }
    }

    /// The tenant that owns pipeline `name`, if one does.
    pub fn tenant_of(&self, pipeline: &str) -> Option<&str> {
        self.tenants
            .iter()
            .find(|t| t.pipelines.iter().any(|p| p == pipeline))
            .map(|t| t.name.as_str())
    }

    /// The pipeline named `name`.
    pub fn pipeline(&self, name: &str) -> Option<&PipelineConfig> {
        self.pipelines.iter().find(|p| p.name == name)
    }

    /// The indexer settings pipeline `name` uses, with where they sit in the
    /// config (`pipelines.<name>.indexer` or `indexer`).
    pub fn indexer_for(&self, pipeline: &str) -> Option<(String, &IndexerConfig)> {
        match self.pipeline(pipeline).and_then(|p| p.indexer.as_ref()) {
            Some(own) => Some((format!("pipelines.{pipeline}.indexer"), own)),
            None => self.indexer.as_ref().map(|i| ("indexer".to_owned(), i)),
        }
    }

    /// Every plugin with where it sits in the config (`connectors.books`, ...).
    pub fn plugins(&self) -> Vec<(String, &PluginSpec)> {
        let mut all: Vec<(String, &PluginSpec)> = self
            .connectors
            .iter()
            .map(|c| (format!("connectors.{}", c.name), &c.plugin))
            .collect();
        for p in &self.pipelines {
            for s in &p.stages {
                all.push((format!("pipelines.{}.stages.{}", p.name, s.name), &s.plugin));
            }
            if let Some(indexer) = &p.indexer {
                all.push((format!("pipelines.{}.indexer", p.name), &indexer.plugin));
            }
        }
        if let Some(indexer) = &self.indexer {
            all.push(("indexer".to_owned(), &indexer.plugin));
        }
        if let Some(plugin) = &self.dead_letters.plugin {
            all.push(("dead_letters".to_owned(), plugin));
        }
        all
    }

    /// Every structural problem (names, references, numbers, files), all at
    /// once. Plugin configs are checked by the plugins themselves, later.
    pub fn check(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        for (name, value) in [
            ("stall_timeout", self.runner.stall_timeout),
            ("liveness_timeout", self.runner.liveness_timeout),
            ("log_interval", self.runner.log_interval),
        ] {
            if value.is_zero() {
                errors.push(error(format!("runner.{name}"), "must be more than zero"));
            }
        }
        let stall = self.runner.stall_timeout;
        for (location, spec) in self.plugins() {
            let call = spec.limits.call_timeout();
            if !location.starts_with("connectors.") && call >= stall {
                errors.push(error(
                    "runner.stall_timeout",
                    format!(
                        "must be longer than the longest call a document may wait on ({location} has call_timeout {call:?})"
                    ),
                ));
                break;
            }
        }
        if self.connectors.is_empty() {
            errors.push(error("connectors", "at least one connector is needed"));
        }
        let mut names = HashSet::new();
        for c in &self.connectors {
            if !names.insert(&c.name) {
                errors.push(error(
                    format!("connectors.{}", c.name),
                    "duplicate connector name",
                ));
            }
            if self.pipeline(&c.pipeline).is_none() {
                errors.push(error(
                    format!("connectors.{}.pipeline", c.name),
                    format!("no pipeline is named `{}`", c.pipeline),
                ));
            } else if self.indexer_for(&c.pipeline).is_none() {
                errors.push(error(
                    format!("pipelines.{}", c.pipeline),
                    "no indexer: add an [indexer] section, or one to this pipeline",
                ));
            }
        }
        let mut names = HashSet::new();
        for p in &self.pipelines {
            if !names.insert(&p.name) {
                errors.push(error(
                    format!("pipelines.{}", p.name),
                    "duplicate pipeline name",
                ));
            }
            let mut stage_names = HashSet::new();
            for s in &p.stages {
                if !stage_names.insert(&s.name) {
                    errors.push(error(
                        format!("pipelines.{}.stages.{}", p.name, s.name),
                        "duplicate stage name in this pipeline",
                    ));
                }
            }
        }
        let mut counts = vec![
            (
                "publisher.queue_capacity".to_owned(),
                self.publisher.queue_capacity,
            ),
            (
                "publisher.queue_max_mib".to_owned(),
                self.publisher.queue_max_mib,
            ),
            ("worker.threads".to_owned(), self.worker.threads),
        ];
        let indexers = self
            .indexer
            .iter()
            .map(|i| ("indexer".to_owned(), i))
            .chain(self.pipelines.iter().filter_map(|p| {
                p.indexer
                    .as_ref()
                    .map(|i| (format!("pipelines.{}.indexer", p.name), i))
            }));
        for (location, indexer) in indexers {
            counts.push((format!("{location}.instances"), indexer.instances));
            if indexer.instances > IndexerConfig::MAX_INSTANCES {
                errors.push(error(
                    format!("{location}.instances"),
                    format!("must be at most {}", IndexerConfig::MAX_INSTANCES),
                ));
            }
            counts.push((format!("{location}.batch_size"), indexer.batch_size));
            counts.push((
                format!("{location}.batch_max_bytes"),
                indexer.batch_max_bytes,
            ));
        }
        for (name, value) in counts {
            if value == 0 {
                errors.push(error(name, "must be at least 1"));
            }
        }
        if let Some(kafka) = &self.kafka {
            kafka.check(&mut errors);
        }
        // Connectors and indexers keep state across documents (a crawl, a
        // batch being built): only stages may start afresh for each one.
        let not_stages = self
            .connectors
            .iter()
            .map(|c| (format!("connectors.{}", c.name), &c.plugin))
            .chain(self.pipelines.iter().filter_map(|p| {
                p.indexer
                    .as_ref()
                    .map(|i| (format!("pipelines.{}.indexer", p.name), &i.plugin))
            }))
            .chain(
                self.indexer
                    .iter()
                    .map(|i| ("indexer".to_owned(), &i.plugin)),
            );
        for (location, spec) in not_stages {
            if spec.instance == crate::plugin::InstancePolicy::Fresh {
                errors.push(error(
                    format!("{location}.plugin.instance"),
                    "only stages can have a fresh instance per document",
                ));
            }
        }
        let mut tenant_names = HashSet::new();
        let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
        for t in &self.tenants {
            if !tenant_names.insert(&t.name) {
                errors.push(error(
                    format!("tenants.{}", t.name),
                    "duplicate tenant name",
                ));
            }
            for p in &t.pipelines {
                if self.pipeline(p).is_none() {
                    errors.push(error(
                        format!("tenants.{}.pipelines", t.name),
                        format!("no pipeline is named `{p}`"),
                    ));
                } else if let Some(other) = owner.insert(p, &t.name) {
                    errors.push(error(
                        format!("tenants.{}.pipelines", t.name),
                        format!("pipeline `{p}` already belongs to tenant `{other}`"),
                    ));
                }
            }
        }
        for (location, spec) in self.plugins() {
            if !spec.path.is_file() {
                errors.push(error(
                    format!("{location}.plugin.path"),
                    format!("no plugin file at {}", spec.path.display()),
                ));
            }
            for (i, dir) in spec.grants.dirs.iter().enumerate() {
                if !dir.host.is_dir() {
                    errors.push(error(
                        format!("{location}.plugin.grants.dirs[{i}].host"),
                        format!("no directory at {}", dir.host.display()),
                    ));
                }
                if !dir.guest.starts_with('/') {
                    errors.push(error(
                        format!("{location}.plugin.grants.dirs[{i}].guest"),
                        format!("`{}` must be an absolute path such as /data", dir.guest),
                    ));
                }
            }
            if spec.limits.memory_mib() == 0 {
                errors.push(error(
                    format!("{location}.plugin.limits.memory_mib"),
                    "must be at least 1",
                ));
            }
            if spec.limits.call_timeout().is_zero() {
                errors.push(error(
                    format!("{location}.plugin.limits.call_timeout"),
                    "must be more than 0",
                ));
            }
            for (name, value) in [
                ("max_children", spec.limits.max_children().into()),
                ("max_document_mib", spec.limits.max_document_mib()),
                (
                    "log_lines_per_second",
                    spec.limits.log_lines_per_second().into(),
                ),
            ] {
                if value == 0 {
                    errors.push(error(
                        format!("{location}.plugin.limits.{name}"),
                        "must be at least 1",
                    ));
                }
            }
            let max_depth = crate::document::DocLimits::MAX_DEPTH;
            if !(1..=max_depth).contains(&(spec.limits.max_depth() as usize)) {
                errors.push(error(
                    format!("{location}.plugin.limits.max_depth"),
                    format!("must be from 1 to {max_depth}"),
                ));
            }
            if let Some(digest) = &spec.sha256
                && (digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                errors.push(error(
                    format!("{location}.plugin.sha256"),
                    "must be 64 hexadecimal digits (a SHA-256)",
                ));
            }
        }
        errors
    }
}

/// Set `a__b__c` in `table` to `value`, parsed as a TOML value when it is one
/// (numbers, booleans, arrays, durations in quotes), else taken as a string.
fn apply_override(table: &mut toml::Table, path: &str, value: &str) -> Result<(), String> {
    let keys: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
    if keys.iter().any(String::is_empty) {
        return Err("empty key in the override name".into());
    }
    if matches!(keys[0].as_str(), "connectors" | "pipelines") {
        return Err("connectors and pipelines cannot be overridden from the environment".into());
    }
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_owned()));
    let (last, parents) = keys.split_last().ok_or("empty override name")?;
    let mut node = table;
    for key in parents {
        node = node
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| format!("`{key}` is not a section"))?;
    }
    node.insert(last.clone(), parsed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = { path = "conn.wasm", grants = { dirs = [{ host = "data", guest = "/data" }] } }

        [[pipelines]]
        name = "p"
        stages = [{ name = "s", plugin = { path = "/abs/stage.wasm", config = { a = 1 } } }]

        [indexer]
        plugin = { path = "idx.wasm" }
    "#;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Config::parse(text, Path::new("/etc/weir"), env)
    }

    #[test]
    fn defaults_and_relative_paths() {
        let config = parse(MINIMAL, &[]).expect("valid");
        assert_eq!(config.publisher.queue_capacity, 10_000);
        let (location, indexer) = config.indexer_for("p").expect("indexer");
        assert_eq!(location, "indexer");
        assert_eq!(indexer.batch_size, 100);
        assert_eq!(indexer.retryable_statuses, [429, 503]);
        assert_eq!(
            config.connectors[0].plugin.path,
            Path::new("/etc/weir/conn.wasm")
        );
        assert_eq!(
            config.connectors[0].plugin.grants.dirs[0].host,
            Path::new("/etc/weir/data")
        );
        assert_eq!(
            config.pipelines[0].stages[0].plugin.path,
            Path::new("/abs/stage.wasm")
        );
        assert_eq!(config.pipelines[0].stages[0].plugin.config["a"], 1);
    }

    #[test]
    fn the_stall_timeout_outlasts_every_call_a_document_waits_on() {
        let config = parse(MINIMAL, &[("WEIR__RUNNER__STALL_TIMEOUT", "31s")]).expect("valid");
        assert!(
            config
                .check()
                .iter()
                .all(|e| e.location != "runner.stall_timeout")
        );
        let config = parse(MINIMAL, &[("WEIR__RUNNER__STALL_TIMEOUT", "30s")]).expect("valid");
        let errors = config.check();
        let error = errors
            .iter()
            .find(|e| e.location == "runner.stall_timeout")
            .expect("the default 30 s call timeout is not shorter");
        assert!(error.message.contains("call_timeout 30s"), "{error}");
        let config = parse(MINIMAL, &[("WEIR__RUNNER__LIVENESS_TIMEOUT", "0s")]).expect("valid");
        assert!(
            config
                .check()
                .iter()
                .any(|e| e.location == "runner.liveness_timeout")
        );
    }

    #[test]
    fn environment_overrides() {
        let config = parse(
            MINIMAL,
            &[
                ("WEIR__WORKER__THREADS", "7"),
                ("WEIR__INDEXER__BATCH_TIMEOUT", "2s"),
                ("WEIR__RUNNER__CACHE_DIR", "cache"),
                ("UNRELATED", "x"),
            ],
        )
        .expect("valid");
        assert_eq!(config.worker.threads, 7);
        assert_eq!(
            config.indexer.as_ref().map(|i| i.batch_timeout),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            config.runner.cache_dir.as_deref(),
            Some(Path::new("/etc/weir/cache"))
        );
        let err = parse(MINIMAL, &[("WEIR__CONNECTORS__X", "1")]).expect_err("refused");
        assert!(err.to_string().contains("cannot be overridden"), "{err}");
        let err = parse(MINIMAL, &[("WEIR__WORKER__THREADS", "many")]).expect_err("bad type");
        assert!(err.to_string().contains("threads"), "{err}");
    }

    #[test]
    fn unknown_fields_are_errors_with_their_name() {
        let err = parse(
            &MINIMAL.replace("[indexer]", "[indexer]\nbatch_sise = 5"),
            &[],
        )
        .expect_err("unknown field");
        assert!(err.to_string().contains("batch_sise"), "{err}");
        let err = parse("[[connectors]]\nname = 1", &[]).expect_err("bad");
        assert_eq!(err.0.len(), 1);
    }

    #[test]
    fn every_shape_error_is_reported_at_once_with_its_path() {
        let text = MINIMAL.replace(
            "[indexer]",
            "[indexer]\nbatch_sise = 5\ninstances = \"two\"",
        ) + "\n[worker]\nthreads = -1\n[runner]\nlog_interval = \"often\"\n";
        let err = parse(&text, &[]).expect_err("four problems");
        let text = err.to_string();
        assert!(text.starts_with("4 configuration errors:"), "{text}");
        for path in [
            "indexer.batch_sise: unknown key",
            "indexer.instances: invalid type: string \"two\"",
            "worker.threads: invalid value: integer `-1`",
            "runner.log_interval: ",
        ] {
            assert!(text.contains(path), "{path:?} missing from {text}");
        }
    }

    #[test]
    fn check_reports_every_structural_error() {
        let text = MINIMAL.replace("pipeline = \"p\"", "pipeline = \"nope\"")
            + "\n[worker]\nthreads = 0\n[[pipelines]]\nname = \"p\"\n";
        let config = parse(&text, &[]).expect("parses");
        let errors = config.check();
        let locations: Vec<&str> = errors.iter().map(|e| e.location.as_str()).collect();
        for expected in [
            "connectors.c.pipeline",
            "pipelines.p",
            "worker.threads",
            "connectors.c.plugin.path",
            "connectors.c.plugin.grants.dirs[0].host",
            "pipelines.p.stages.s.plugin.path",
            "indexer.plugin.path",
        ] {
            assert!(
                locations.contains(&expected),
                "{expected} missing from {locations:?}"
            );
        }
    }

    #[test]
    fn tenants_give_defaults_to_their_pipelines_plugins() {
        let text = r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = "conn.wasm" }
            [[connectors]]
            name = "other"
            pipeline = "q"
            plugin = { path = "conn.wasm" }

            [[pipelines]]
            name = "p"
            stages = [
                { name = "s", plugin = { path = "s.wasm" } },
                { name = "own", plugin = { path = "s.wasm", limits = { memory_mib = 512 } } },
            ]
            [[pipelines]]
            name = "q"
            stages = [{ name = "s", plugin = { path = "s.wasm" } }]

            [indexer]
            plugin = { path = "idx.wasm" }

            [[tenants]]
            name = "acme"
            pipelines = ["p"]
            limits = { memory_mib = 64, call_timeout = "2s", max_children = 10 }
        "#;
        let config = parse(text, &[]).expect("valid");
        let plugins: BTreeMap<String, &PluginSpec> = config.plugins().into_iter().collect();
        let limits = |location: &str| &plugins[location].limits;
        assert_eq!(limits("pipelines.p.stages.s").memory_mib(), 64);
        assert_eq!(
            limits("pipelines.p.stages.s").call_timeout(),
            Duration::from_secs(2)
        );
        assert_eq!(limits("pipelines.p.stages.s").max_children(), 10);
        assert_eq!(
            limits("pipelines.p.stages.own").memory_mib(),
            512,
            "the plugin's own wins"
        );
        assert_eq!(limits("pipelines.p.stages.own").max_children(), 10);
        assert_eq!(limits("connectors.c").memory_mib(), 64, "its connector too");
        assert_eq!(
            limits("pipelines.q.stages.s").memory_mib(),
            256,
            "another tenant's: default"
        );
        assert_eq!(limits("connectors.other").memory_mib(), 256);
        assert_eq!(
            limits("indexer").memory_mib(),
            256,
            "a shared indexer is no tenant's"
        );
        assert!(
            !config
                .check()
                .iter()
                .any(|e| e.location.starts_with("tenants")),
            "{:?}",
            config.check()
        );

        let bad = format!("{text}\n[[tenants]]\nname = \"acme\"\npipelines = [\"p\", \"nope\"]\n");
        let errors = parse(&bad, &[]).expect("parses").check();
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        for expected in [
            "tenants.acme: duplicate tenant name",
            "tenants.acme.pipelines: pipeline `p` already belongs to tenant `acme`",
            "tenants.acme.pipelines: no pipeline is named `nope`",
        ] {
            assert!(
                messages.iter().any(|m| m == expected),
                "{expected} not in {messages:?}"
            );
        }
    }

    #[test]
    fn instance_policy_and_digest_are_checked() {
        let text = MINIMAL
            .replace(
                r#"plugin = { path = "idx.wasm" }"#,
                r#"plugin = { path = "idx.wasm", instance = "fresh", sha256 = "abc" }"#,
            )
            .replace(
                r#"config = { a = 1 } }"#,
                r#"config = { a = 1 }, instance = "fresh", limits = { log_lines_per_second = 0 } }"#,
            );
        let errors = parse(&text, &[]).expect("parses").check();
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        for expected in [
            "indexer.plugin.instance: only stages can have a fresh instance per document",
            "indexer.plugin.sha256: must be 64 hexadecimal digits (a SHA-256)",
            "pipelines.p.stages.s.plugin.limits.log_lines_per_second: must be at least 1",
        ] {
            assert!(
                messages.iter().any(|m| m == expected),
                "{expected} not in {messages:?}"
            );
        }
        assert!(
            !messages
                .iter()
                .any(|m| m.contains("stages.s.plugin.instance")),
            "a stage may be fresh: {messages:?}"
        );
    }
}
