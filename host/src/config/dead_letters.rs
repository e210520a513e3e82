//! `[dead_letters]`: where a local run keeps the documents that failed.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::plugin::PluginSpec;

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
