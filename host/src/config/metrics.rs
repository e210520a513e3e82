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
}
