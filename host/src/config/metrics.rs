//! `[metrics]`: where a process serves its metrics and health endpoints.

use serde::{Deserialize, Serialize};

/// `[metrics]`
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` to serve the Prometheus text format (`/metrics`) and the
    /// health endpoints on; none by default. `--metrics-addr` wins.
    #[serde(default)]
    pub addr: Option<String>,
    /// Let `weir tap` (`GET /tap` on that address) copy live documents
    /// out of this process. Off by default: anyone who reaches the address
    /// could read documents.
    #[serde(default)]
    pub tap: bool,
}
