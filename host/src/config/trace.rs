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
    /// Most MiB one run's trace may hold (1 to 1,048,576; default 1024:
    /// some 15 million documents). Past it the run goes on untraced, its
    /// trace saying where it stopped.
    #[serde(default = "TraceConfig::default_max_mib")]
    pub max_mib: u64,
}

impl TraceConfig {
    fn default_path() -> PathBuf {
        PathBuf::from("trace")
    }

    /// The default (and, under `weir serve`, the most) `max_mib`.
    pub const DEFAULT_MAX_MIB: u64 = 1024;

    fn default_max_mib() -> u64 {
        Self::DEFAULT_MAX_MIB
    }

    /// `max_mib` in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_mib.saturating_mul(1 << 20)
    }
}

impl Default for TraceConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            path: Self::default_path(),
            max_mib: Self::DEFAULT_MAX_MIB,
        }
    }
}
