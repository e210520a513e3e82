//! A run of a tenant as it is kept (the control plane's store, a fleet's
//! `<name>_runs`) and told (the API, a run's process): its state, its
//! counts, its record, and the clock its times are read on.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use serde::{Deserialize, Serialize};

use crate::run::RunStatus;
use crate::telemetry::RunStats;

/// Where a run is: going on (`running`, `paused`, `stopping`), or how it
/// ended. The API, the run process protocol and a fleet's kept runs say it
/// in its snake-case name; the store keeps that same text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    Paused,
    /// Asked to stop; its documents in flight get the grace period.
    Stopping,
    /// A continuous run whose process died, waiting to start it again.
    Restarting,
    Success,
    PartialSuccess,
    Failure,
    Interrupted,
    /// The server stopped while it went on.
    Lost,
}

impl RunState {
    /// The states of a run going on: the only ones that are not its end.
    pub const ACTIVE: [Self; 4] = [
        Self::Running,
        Self::Paused,
        Self::Stopping,
        Self::Restarting,
    ];

    const ALL: [Self; 9] = [
        Self::Running,
        Self::Paused,
        Self::Stopping,
        Self::Restarting,
        Self::Success,
        Self::PartialSuccess,
        Self::Failure,
        Self::Interrupted,
        Self::Lost,
    ];

    /// Whether a run in this state is going on.
    pub fn is_active(self) -> bool {
        Self::ACTIVE.contains(&self)
    }

    /// Its name, as the API shows it and the store keeps it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Stopping => "stopping",
            Self::Restarting => "restarting",
            Self::Success => "success",
            Self::PartialSuccess => "partial_success",
            Self::Failure => "failure",
            Self::Interrupted => "interrupted",
            Self::Lost => "lost",
        }
    }

    /// The state named `name`.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.name() == name)
    }

    /// The active states as an SQL list, `('running', 'paused', 'stopping')`.
    pub fn active_sql() -> String {
        let names: Vec<String> = Self::ACTIVE
            .iter()
            .map(|state| format!("'{}'", state.name()))
            .collect();
        format!("({})", names.join(", "))
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a run that ended ended.
impl From<RunStatus> for RunState {
    fn from(status: RunStatus) -> Self {
        match status {
            RunStatus::Success => Self::Success,
            RunStatus::PartialSuccess => Self::PartialSuccess,
            RunStatus::Failure => Self::Failure,
            RunStatus::Interrupted => Self::Interrupted,
        }
    }
}

impl ToSql for RunState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.name()))
    }
}

impl FromSql for RunState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let name = value.as_str()?;
        Self::named(name).ok_or_else(|| {
            FromSqlError::Other(format!("`{name}` is not the state of a run").into())
        })
    }
}

/// Counts of a run, live or final.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub published: u64,
    pub processed: u64,
    pub indexed: u64,
    pub failed: u64,
    pub dropped: u64,
}

impl Counts {
    /// A run's counts as `stats` has them now.
    pub(crate) fn of(stats: &RunStats) -> Self {
        let s = stats.snapshot();
        Self {
            published: s.published,
            processed: s.processed,
            indexed: s.indexed,
            failed: s.failed,
            dropped: s.dropped,
        }
    }

    /// These counts and `more`, added (a continuous run's processes).
    pub(crate) fn plus(self, more: Self) -> Self {
        Self {
            published: self.published + more.published,
            processed: self.processed + more.processed,
            indexed: self.indexed + more.indexed,
            failed: self.failed + more.failed,
            dropped: self.dropped + more.dropped,
        }
    }

    /// Set `stats` to these counts (as a run's process reported them).
    pub(crate) fn mirror_into(self, stats: &RunStats) {
        use std::sync::atomic::Ordering::Relaxed;
        stats.published.store(self.published, Relaxed);
        stats.processed.store(self.processed, Relaxed);
        stats.indexed.store(self.indexed, Relaxed);
        stats.failed.store(self.failed, Relaxed);
        stats.dropped.store(self.dropped, Relaxed);
    }
}

/// One run as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub tenant: String,
    /// Going on, or how it ended.
    pub status: RunState,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_has_one_name_in_json_in_sql_and_in_words() {
        for state in RunState::ALL {
            let json = serde_json::to_value(state).expect("writes");
            assert_eq!(json, serde_json::Value::from(state.name()));
            assert_eq!(serde_json::from_value::<RunState>(json).ok(), Some(state));
            assert_eq!(RunState::named(&state.to_string()), Some(state));
        }
        assert_eq!(
            RunState::from(RunStatus::PartialSuccess).name(),
            "partial_success"
        );
        assert_eq!(
            RunState::active_sql(),
            "('running', 'paused', 'stopping', 'restarting')"
        );
        assert!(RunState::Stopping.is_active() && !RunState::Lost.is_active());
        let db = rusqlite::Connection::open_in_memory().expect("sqlite");
        let back: RunState = db
            .query_row("SELECT ?1", [RunState::PartialSuccess], |row| row.get(0))
            .expect("reads back");
        assert_eq!(back, RunState::PartialSuccess);
        let stored: String = db
            .query_row("SELECT ?1", [RunState::Interrupted], |row| row.get(0))
            .expect("text");
        assert_eq!(stored, "interrupted");
    }
}
