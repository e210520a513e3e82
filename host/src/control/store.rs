//! The control plane's memory of runs: one SQLite file in the data
//! directory, so finished runs (their counts and summaries) outlive a
//! restart of `weir serve`.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};
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

/// Why the store could not do something.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data directory could not be made.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// A run's counts could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

#[derive(Debug)]
pub struct Store {
    db: Mutex<Connection>,
}

impl Store {
    /// Open (or make) the store in `dir`; runs that were going on when the
    /// server last stopped are marked `lost`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)?;
        let db = Connection::open(dir.join("runs.sqlite3"))?;
        db.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS runs (
                 id TEXT PRIMARY KEY,
                 tenant TEXT NOT NULL,
                 status TEXT NOT NULL,
                 submitted_ms INTEGER NOT NULL,
                 finished_ms INTEGER,
                 counts TEXT NOT NULL,
                 summary TEXT,
                 error TEXT,
                 config TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS runs_by_tenant ON runs (tenant, submitted_ms);",
        )?;
        db.execute(
            "UPDATE runs SET status = 'lost', finished_ms = ?1,
                 error = 'weir serve stopped while the run was going on'
             WHERE status IN ('running', 'paused', 'stopping')",
            params![now_ms()],
        )?;
        Ok(Self { db: Mutex::new(db) })
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn insert(&self, run: &RunRecord, config: &str) -> Result<(), StoreError> {
        self.db().execute(
            "INSERT INTO runs (id, tenant, status, submitted_ms, counts, config)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                run.id,
                run.tenant,
                run.status,
                run.submitted_ms,
                serde_json::to_string(&run.counts)?,
                config
            ],
        )?;
        Ok(())
    }

    /// Record how a run ended.
    pub fn finish(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE runs SET status = ?2, finished_ms = ?3, counts = ?4, summary = ?5, error = ?6
             WHERE id = ?1",
            params![
                run.id,
                run.status,
                run.finished_ms,
                serde_json::to_string(&run.counts)?,
                run.summary.as_ref().map(serde_json::Value::to_string),
                run.error
            ],
        )?;
        Ok(())
    }

    pub fn set_status(&self, id: &str, status: &str) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE runs SET status = ?2 WHERE id = ?1",
            params![id, status],
        )?;
        Ok(())
    }

    /// One run, whoever's.
    pub fn get(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        let db = self.db();
        let mut query = db.prepare(&format!("{SELECT} WHERE id = ?1"))?;
        Ok(query.query_row(params![id], record).optional()?)
    }

    /// The runs of `tenant` (every tenant's for `None`), newest first, at
    /// most `limit`.
    pub fn list(&self, tenant: Option<&str>, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let db = self.db();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match tenant {
            Some(tenant) => db
                .prepare(&format!(
                    "{SELECT} WHERE tenant = ?1 ORDER BY submitted_ms DESC, id DESC LIMIT ?2"
                ))?
                .query_map(params![tenant, limit], record)?
                .collect::<Result<Vec<_>, _>>()?,
            None => db
                .prepare(&format!(
                    "{SELECT} ORDER BY submitted_ms DESC, id DESC LIMIT ?1"
                ))?
                .query_map(params![limit], record)?
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(rows)
    }
}

const SELECT: &str =
    "SELECT id, tenant, status, submitted_ms, finished_ms, counts, summary, error FROM runs";

fn record(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    let counts: String = row.get(5)?;
    let summary: Option<String> = row.get(6)?;
    Ok(RunRecord {
        id: row.get(0)?,
        tenant: row.get(1)?,
        status: row.get(2)?,
        submitted_ms: row.get(3)?,
        finished_ms: row.get(4)?,
        counts: serde_json::from_str(&counts).unwrap_or_default(),
        summary: summary.and_then(|s| serde_json::from_str(&s).ok()),
        error: row.get(7)?,
    })
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

    fn run(id: &str, tenant: &str, status: &str, at: u64) -> RunRecord {
        RunRecord {
            id: id.into(),
            tenant: tenant.into(),
            status: status.into(),
            submitted_ms: at,
            finished_ms: None,
            counts: Counts::default(),
            summary: None,
            error: None,
        }
    }

    #[test]
    fn finished_runs_outlive_a_reopen_and_live_ones_are_lost()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        {
            let store = Store::open(dir.path())?;
            store.insert(&run("a", "acme", "running", 1), "")?;
            store.insert(&run("b", "acme", "running", 2), "")?;
            store.insert(&run("c", "zeta", "running", 3), "")?;
            let mut done = run("a", "acme", "success", 1);
            done.counts.indexed = 7;
            done.finished_ms = Some(5);
            done.summary = Some(serde_json::json!({"connectors": []}));
            store.finish(&done)?;
        }
        let store = Store::open(dir.path())?;
        let acme = store.list(Some("acme"), 10)?;
        assert_eq!(
            acme.iter()
                .map(|r| (r.id.as_str(), r.status.as_str()))
                .collect::<Vec<_>>(),
            [("b", "lost"), ("a", "success")]
        );
        assert_eq!(acme[1].counts.indexed, 7);
        assert!(acme[1].summary.is_some());
        assert_eq!(store.list(None, 10)?.len(), 3);
        assert_eq!(store.get("c")?.map(|r| r.tenant), Some("zeta".into()));
        assert_eq!(store.get("nope")?, None);
        Ok(())
    }
}
