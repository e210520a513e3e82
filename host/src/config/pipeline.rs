//! `[[connectors]]` and `[[pipelines]]` with their stages.

use serde::{Deserialize, Serialize};

use super::IndexerConfig;
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
