//! `[worker]`: the workers that run pipelines, and their retries.

use std::time::Duration;

use serde::{Deserialize, Serialize};

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
