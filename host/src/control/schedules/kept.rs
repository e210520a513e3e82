//! A schedule as it is kept: one row per schedule in the control plane's
//! store (and, under a fleet, on `<name>_schedules` where a standby reads
//! it), written before each start it makes, and which runs it started.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::super::store::{Store, StoreError};
use crate::config::ScheduleConfig;

/// A schedule as kept: its config and where it is. Written whole, before
/// each start, so that a control plane that reads it (after a restart, or
/// taking over a fleet) never makes a start again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Kept {
    pub(crate) id: String,
    pub(crate) tenant: String,
    /// The config as submitted (its `[schedule]` with it): each run's.
    pub(crate) config: String,
    /// Its `[schedule]`.
    pub(crate) schedule: ScheduleConfig,
    pub(crate) created_ms: u64,
    /// The next start as the schedule says it, without jitter; `None`
    /// when it has no more.
    pub(crate) due_ms: Option<u64>,
    /// The next start, jitter added: when it is made.
    pub(crate) next_ms: Option<u64>,
    pub(crate) last_start_ms: Option<u64>,
    /// The run the last start made.
    pub(crate) last_run: Option<String>,
    /// Starts skipped since the schedule was submitted (or replaced).
    pub(crate) skipped: u64,
    /// The last skip: when, how many, and why.
    pub(crate) last_skip: Option<Skip>,
    /// Why the last start did not make a run, if it did not.
    pub(crate) last_error: Option<String>,
}

/// Starts skipped at once, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skip {
    pub at_ms: u64,
    pub count: u64,
    /// `overlap`, `late`, `quota`, `unkept` (as `weir_scheduled_starts_total`).
    pub reason: String,
    pub message: String,
}

/// The tables, made unless they are: the schedules, and which schedule
/// started which run (a run's link is removed with the run).
pub(super) fn make_tables(store: &Store) -> Result<(), StoreError> {
    store.db().execute_batch(
        "CREATE TABLE IF NOT EXISTS schedules (
             id TEXT PRIMARY KEY,
             tenant TEXT NOT NULL,
             kept TEXT NOT NULL
         );
         CREATE TABLE IF NOT EXISTS schedule_runs (
             run_id TEXT PRIMARY KEY,
             schedule_id TEXT NOT NULL
         );
         CREATE TRIGGER IF NOT EXISTS schedule_runs_go_with_runs AFTER DELETE ON runs
         BEGIN DELETE FROM schedule_runs WHERE run_id = OLD.id; END;",
    )?;
    Ok(())
}

/// Keep `kept` as it is now (written whole).
pub(super) fn put(store: &Store, kept: &Kept) -> Result<(), StoreError> {
    store.db().execute(
        "INSERT INTO schedules (id, tenant, kept) VALUES (?1, ?2, ?3)
         ON CONFLICT (id) DO UPDATE SET tenant = ?2, kept = ?3",
        params![kept.id, kept.tenant, serde_json::to_string(kept)?],
    )?;
    Ok(())
}

/// Forget schedule `id`.
pub(super) fn remove(store: &Store, id: &str) -> Result<(), StoreError> {
    store
        .db()
        .execute("DELETE FROM schedules WHERE id = ?1", params![id])?;
    Ok(())
}

/// Every schedule kept, oldest first; a row that does not read is left out
/// (and logged).
pub(super) fn all(store: &Store) -> Result<Vec<Kept>, StoreError> {
    let db = store.db();
    let mut query = db.prepare("SELECT id, kept FROM schedules ORDER BY rowid")?;
    let rows = query
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, text)| match serde_json::from_str(&text) {
            Ok(kept) => Some(kept),
            Err(e) => {
                tracing::error!(schedule = %id, error = %e, "a kept schedule does not read: left out");
                None
            }
        })
        .collect())
}

/// Every schedule is `kept` and no other (what a fleet kept, read by the
/// control plane that takes over).
pub(super) fn replace_all(store: &Store, kept: &[Kept]) -> Result<(), StoreError> {
    store.db().execute("DELETE FROM schedules", [])?;
    for one in kept {
        put(store, one)?;
        if let Some(run) = &one.last_run {
            link(store, run, &one.id)?;
        }
    }
    Ok(())
}

/// Run `run` was started by schedule `schedule`.
pub(super) fn link(store: &Store, run: &str, schedule: &str) -> Result<(), StoreError> {
    store.db().execute(
        "INSERT INTO schedule_runs (run_id, schedule_id) VALUES (?1, ?2)
         ON CONFLICT (run_id) DO UPDATE SET schedule_id = ?2",
        params![run, schedule],
    )?;
    Ok(())
}

/// Run `run` was not started after all.
pub(super) fn unlink(store: &Store, run: &str) -> Result<(), StoreError> {
    store
        .db()
        .execute("DELETE FROM schedule_runs WHERE run_id = ?1", params![run])?;
    Ok(())
}

/// The schedule that started run `run`, if one did.
pub(super) fn schedule_of(store: &Store, run: &str) -> Result<Option<String>, StoreError> {
    Ok(store
        .db()
        .query_row(
            "SELECT schedule_id FROM schedule_runs WHERE run_id = ?1",
            params![run],
            |row| row.get(0),
        )
        .optional()?)
}
