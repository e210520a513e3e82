//! `[state]`: where connectors keep their state between runs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[state]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// Local mode: the SQLite file that keeps each connector's state,
    /// relative to the config; made when first needed. Default
    /// `weir-state.sqlite`. Kafka and Hybrid modes keep it on a compacted
    /// topic per pipeline, `<pipeline>_state`, so any runner can resume.
    #[serde(default = "StateConfig::default_path")]
    pub path: PathBuf,
}

impl StateConfig {
    fn default_path() -> PathBuf {
        PathBuf::from("weir-state.sqlite")
    }
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            path: Self::default_path(),
        }
    }
}
