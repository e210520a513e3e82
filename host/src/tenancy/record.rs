//! A run of a tenant as it is kept (the control plane's store, a fleet's
//! `<name>_runs`) and told (the API, a run's process): its counts, its
//! record, and the clock its times are read on.

use serde::{Deserialize, Serialize};

/// Counts of a run, live or final.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub published: u64,
    pub processed: u64,
    pub indexed: u64,
    pub failed: u64,
    pub dropped: u64,
}

/// One run as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub tenant: String,
    /// `running`, `paused`, `stopping`, or how it ended: `success`,
    /// `partial_success`, `failure`, `interrupted`, `lost` (the server
    /// stopped while it went on).
    pub status: String,
    /// Milliseconds since the epoch.
    pub submitted_ms: u64,
    pub finished_ms: Option<u64>,
    pub counts: Counts,
    /// The run summary (connectors and stages), once finished.
    pub summary: Option<serde_json::Value>,
    pub error: Option<String>,
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
