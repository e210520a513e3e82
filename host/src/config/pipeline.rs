//! `[[connectors]]` and `[[pipelines]]` with their stages.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::IndexerConfig;
use crate::core::condition::Condition;
use crate::plugin::PluginSpec;

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
    /// It never ends by itself (a topic, a queue, a generator set to go on
    /// for ever): no `runner.connector_timeout` and no execute deadline
    /// unless `limits.execute_timeout` is set, a report line every
    /// `runner.report_every`, and under `weir serve` its run's process is
    /// started again when it dies. A streaming connector is continuous
    /// whatever this says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continuous: bool,
}

impl ConnectorConfig {
    /// Whether it never ends by itself: `continuous = true`, or granted a
    /// source that never ends (a topic, a queue, pushed documents), which
    /// only a streaming connector reads.
    pub fn never_ends(&self) -> bool {
        self.continuous || !self.plugin.grants.sources().is_empty()
    }
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
    /// How a batch stage (one that exports `stage-batch-api`) is handed
    /// documents; a document stage is called once per document whatever
    /// this says.
    #[serde(default)]
    pub batch: StageBatch,
    /// Run the stage only for the documents this holds for; the others
    /// pass it untouched (counted as skipped in the stage table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
    /// A new version of this stage run beside it on a sample of documents:
    /// its output is compared with the live stage's and the differences
    /// reported; it never reaches the index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowConfig>,
}

/// `shadow = { plugin, percent, ids, report }` of a stage.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowConfig {
    /// The new version: its component and settings, as a stage's.
    pub plugin: PluginSpec,
    /// The share of documents it runs on, 0 to 100 (default 100 when no
    /// `ids` are given, else 0). Which documents is decided by a hash of
    /// their id, the same in every worker and process.
    #[serde(default)]
    pub percent: Option<f64>,
    /// Documents it runs on whatever `percent` says (at most 10,000 ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// A JSON-lines file each document whose outputs differ is appended
    /// to, with the differences per field (at most
    /// [`ShadowConfig::MAX_REPORTED`] documents in the file, earlier runs'
    /// included). Without one,
    /// the first differences are logged and all are counted in metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<std::path::PathBuf>,
}

impl ShadowConfig {
    /// Most ids a shadow may name.
    pub const MAX_IDS: usize = 10_000;
    /// Most differing documents a shadow's report file holds.
    pub const MAX_REPORTED: u64 = 100_000;

    /// The share of documents sampled, 0 to 1.
    pub fn share(&self) -> f64 {
        self.percent
            .unwrap_or(if self.ids.is_empty() { 100.0 } else { 0.0 })
            .clamp(0.0, 100.0)
            / 100.0
    }
}

/// `batch = { size, wait }` of a stage: a worker hands a batch stage up to
/// `size` documents in one call, and waits at most `wait` after the first
/// to fill a batch, so no document is held longer than that for company.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StageBatch {
    /// Most documents in one call. Default 64, at most 4,096.
    #[serde(default = "StageBatch::default_size")]
    pub size: usize,
    /// Longest wait for more documents after the first of a batch. Default
    /// 5 ms, at most 10 s; `0s` takes what is already waiting.
    #[serde(default = "StageBatch::default_wait", with = "humantime_serde")]
    pub wait: Duration,
}

impl StageBatch {
    /// The most documents a stage call may be handed.
    pub const MAX_SIZE: usize = 4096;
    /// The longest a worker may wait to fill a batch.
    pub const MAX_WAIT: Duration = Duration::from_secs(10);
    /// A worker stops filling a batch once its documents reach this many
    /// bytes, so what workers hold stays bounded whatever the documents' size.
    pub const MAX_BYTES: usize = 8 << 20;

    fn default_size() -> usize {
        64
    }

    fn default_wait() -> Duration {
        Duration::from_millis(5)
    }
}

impl Default for StageBatch {
    fn default() -> Self {
        Self {
            size: Self::default_size(),
            wait: Self::default_wait(),
        }
    }
}
