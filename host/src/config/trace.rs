//! `[trace]`: what became of each document of a run, kept for `weir trace`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[trace]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TraceConfig {
    /// Whether each run keeps its trace. Default false: a run then records
    /// nothing and pays nothing.
    #[serde(default)]
    pub enabled: bool,
    /// The folder of trace files, one a run (`<run id>.jsonl`), relative to
    /// the config. Default `trace`.
    #[serde(default = "TraceConfig::default_path")]
    pub path: PathBuf,
}

impl TraceConfig {
    fn default_path() -> PathBuf {
        PathBuf::from("trace")
    }
}

impl Default for TraceConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            path: Self::default_path(),
        }
    }
}
