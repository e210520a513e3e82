//! `[runner]`: how runs are driven (timeouts, logging, the component cache).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    /// How often a continuous connector (`continuous = true`, or a
    /// streaming one) logs its report line: counts so far and rates over
    /// the period. Default 60 s.
    #[serde(
        default = "RunnerConfig::default_report_every",
        with = "humantime_serde"
    )]
    pub report_every: Duration,
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
    fn default_report_every() -> Duration {
        Duration::from_secs(60)
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
            report_every: Self::default_report_every(),
            stall_timeout: Self::default_stall_timeout(),
            liveness_timeout: Self::default_liveness_timeout(),
            grace_period: Self::default_grace_period(),
            cache_dir: None,
            cache_max_mib: Self::default_cache_max_mib(),
        }
    }
}
