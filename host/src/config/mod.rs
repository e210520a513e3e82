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

//!
//! The model is split by section (`runner.rs`, `kafka.rs`, ...); `load.rs`
//! reads a file or text into it, `check/` finds every structural problem,
//! `plugins.rs` walks every plugin with where it sits.

use serde::{Deserialize, Serialize};

mod cache;
mod check;
pub use check::MAX_DURATION;
/// The built-in bounds, for the tests that check them from outside.
#[cfg(test)]
pub(crate) use check::{bounds, names};
mod dead_letters;
mod indexer;
mod kafka;
mod load;
mod locate;
mod metrics;
mod pipeline;
mod plugins;
mod publisher;
mod runner;
mod schedule;
mod shape;
pub(crate) use shape::check_as;
pub mod state;
mod tenants;
#[cfg(test)]
mod tests;
mod trace;
mod vars;
mod worker;

pub use crate::core::problem::{Problem, Problems};
pub use cache::CacheConfig;
pub use dead_letters::DeadLetterConfig;
pub use indexer::IndexerConfig;
pub use kafka::KafkaConfig;
pub use load::{ENV_PREFIX, OverrideError};
pub use locate::{Located, Place, Sources, report};
pub use metrics::MetricsConfig;
pub use pipeline::{ConnectorConfig, PipelineConfig, ShadowConfig, StageBatch, StageConfig};
pub use plugins::{PluginAt, PluginRole};
pub use publisher::PublisherConfig;
pub use runner::RunnerConfig;
pub use schedule::{ScheduleConfig, unschedulable};
pub use state::StateConfig;
pub use tenants::TenantConfig;
pub use trace::TraceConfig;
pub use vars::{IncludeError, MAX_INCLUDE_DEPTH, VarError};
pub use worker::WorkerConfig;

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
    /// Connectors, run one after the other in this order (none in a
    /// config of pipelines only, for `weir test`).
    #[serde(default)]
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
    /// Where connectors keep their state between runs (incremental sync).
    #[serde(default)]
    pub state: StateConfig,
    /// The cache plugins keep what services computed in (embeddings).
    #[serde(default)]
    pub cache: CacheConfig,
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
    /// When the config runs again by itself (`config/schedule.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleConfig>,
    /// What became of each document, kept for `weir trace`.
    #[serde(default)]
    pub trace: TraceConfig,
}

impl Config {
    /// The tenant that owns pipeline `name`, if one does.
    pub fn tenant_of(&self, pipeline: &str) -> Option<&str> {
        self.tenants
            .iter()
            .find(|t| t.pipelines.iter().any(|p| p == pipeline))
            .map(|t| t.name.as_str())
    }

    /// The tenant that owns every pipeline, if one does (a run submitted
    /// to `weir serve`): what the plugins outside any pipeline serve.
    pub fn sole_tenant(&self) -> Option<&str> {
        self.common_tenant(self.pipelines.iter().map(|p| p.name.as_str()))
    }

    /// The tenant that owns every one of `pipelines`, if one does (none
    /// when there are none).
    pub fn common_tenant<'a>(&self, pipelines: impl IntoIterator<Item = &'a str>) -> Option<&str> {
        let mut tenants = pipelines.into_iter().map(|p| self.tenant_of(p));
        let first = tenants.next()??;
        tenants.all(|t| t == Some(first)).then_some(first)
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

    /// Every indexer table with where it sits: `indexer` first, then each
    /// pipeline's own (`pipelines.<name>.indexer`).
    /// Why this config cannot be run, when it has no connectors (a config
    /// of pipelines only, for `weir test`).
    pub fn needs_a_source(&self) -> Option<Problem> {
        self.connectors.is_empty().then(|| {
            Problem::new(
                "connectors",
                "at least one connector is needed to run: a config of pipelines only (no connectors, no indexer) is for `weir test <config>`",
            )
        })
    }

    pub fn indexers(&self) -> impl Iterator<Item = (String, &IndexerConfig)> {
        self.indexer
            .iter()
            .map(|i| ("indexer".to_owned(), i))
            .chain(self.pipelines.iter().filter_map(|p| {
                p.indexer
                    .as_ref()
                    .map(|i| (format!("pipelines.{}.indexer", p.name), i))
            }))
    }
}
