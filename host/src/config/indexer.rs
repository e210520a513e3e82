//! `[indexer]` (and a pipeline's own): the backend and how it is fed batches.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plugin::PluginSpec;

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
