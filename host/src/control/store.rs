//! The control plane's memory of runs: one SQLite file in the data
//! directory, so finished runs (their counts and summaries) outlive a
//! restart of `weir serve`. Runs are listed a page at a time, newest first,
//! from a [`Cursor`]; finished runs beyond a tenant's newest are
//! [pruned](Store::prune).

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use crate::tenancy::record::{RunRecord, RunState, now_ms};
use rusqlite::{Connection, OptionalExtension, params};

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
             CREATE INDEX IF NOT EXISTS runs_by_tenant ON runs (tenant, submitted_ms);
             CREATE INDEX IF NOT EXISTS runs_by_time ON runs (submitted_ms, id);",
        )?;
        db.execute(
            &format!(
                "UPDATE runs SET status = ?1, finished_ms = ?2,
                     error = 'weir serve stopped while the run was going on'
                 WHERE status IN {}",
                RunState::active_sql()
            ),
            params![RunState::Lost, now_ms()],
        )?;
        Ok(Self { db: Mutex::new(db) })
    }

    pub(super) fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
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

    /// Keep `run` with its `config` as it is, whatever was kept of it
    /// (a record another control plane kept: a standby taking over).
    pub fn upsert(&self, run: &RunRecord, config: &str) -> Result<(), StoreError> {
        self.db().execute(
            "INSERT INTO runs (id, tenant, status, submitted_ms, finished_ms, counts, summary, error, config)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (id) DO UPDATE SET status = ?3, finished_ms = ?5, counts = ?6,
                 summary = ?7, error = ?8",
            params![
                run.id,
                run.tenant,
                run.status,
                run.submitted_ms,
                run.finished_ms,
                serde_json::to_string(&run.counts)?,
                run.summary.as_ref().map(serde_json::Value::to_string),
                run.error,
                config
            ],
        )?;
        Ok(())
    }

    /// The config run `id` was submitted with.
    pub fn config_of(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .db()
            .query_row(
                "SELECT config FROM runs WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Keep `config` as run `id`'s: a reload took it up.
    pub fn set_config(&self, id: &str, config: &str) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE runs SET config = ?2 WHERE id = ?1",
            params![id, config],
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

    pub fn set_status(&self, id: &str, status: RunState) -> Result<(), StoreError> {
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

    /// The runs of `tenant` (every tenant's for `None`), newest first,
    /// from just after `after` (the start for `None`), at most `limit`;
    /// and where the next page starts, if there are more.
    pub fn page(
        &self,
        tenant: Option<&str>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<RunRecord>, Option<Cursor>), StoreError> {
        let db = self.db();
        // One more than asked says whether there is a next page.
        let take = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let (ms, id) = after.map_or((i64::MAX, ""), |c| (c.submitted_ms, c.id.as_str()));
        let order = "ORDER BY submitted_ms DESC, id DESC";
        let mut rows = match tenant {
            Some(tenant) => db
                .prepare(&format!(
                    "{SELECT} WHERE tenant = ?1 AND (submitted_ms, id) < (?2, ?3) {order} LIMIT ?4"
                ))?
                .query_map(params![tenant, ms, id, take], record)?
                .collect::<Result<Vec<_>, _>>()?,
            None => db
                .prepare(&format!(
                    "{SELECT} WHERE (submitted_ms, id) < (?1, ?2) {order} LIMIT ?3"
                ))?
                .query_map(params![ms, id, take], record)?
                .collect::<Result<Vec<_>, _>>()?,
        };
        let next = (rows.len() > limit).then(|| {
            rows.truncate(limit);
            rows.last().map(Cursor::of)
        });
        Ok((rows, next.flatten()))
    }

    /// Remove the finished runs of `tenant` (every tenant's for `None`)
    /// beyond its newest `keep` by submission, and those that finished
    /// before `finished_before_ms`; the ids of those removed. A run going
    /// on is never removed.
    pub fn prune(
        &self,
        tenant: Option<&str>,
        keep: usize,
        finished_before_ms: Option<u64>,
    ) -> Result<Vec<String>, StoreError> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let before = finished_before_ms.map_or(0, |ms| i64::try_from(ms).unwrap_or(i64::MAX));
        let db = self.db();
        let mut delete = db.prepare(&format!(
            "DELETE FROM runs WHERE id IN (
                 SELECT id FROM (
                     SELECT id, finished_ms, ROW_NUMBER() OVER (
                         PARTITION BY tenant ORDER BY submitted_ms DESC, id DESC
                     ) AS newest
                     FROM runs
                     WHERE finished_ms IS NOT NULL
                       AND status NOT IN {active}
                       AND (?1 IS NULL OR tenant = ?1)
                 ) WHERE newest > ?2 OR finished_ms < ?3
             ) RETURNING id",
            active = RunState::active_sql()
        ))?;
        let ids = delete
            .query_map(params![tenant, keep, before], |row| row.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(ids)
    }
}

/// Where a page of runs starts: just after this run, newest first. Shown to
/// the API as opaque text, `<submitted_ms>.<id>`, which stays valid when
/// the run it names is pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    submitted_ms: i64,
    id: String,
}

impl Cursor {
    fn of(run: &RunRecord) -> Self {
        Self {
            submitted_ms: i64::try_from(run.submitted_ms).unwrap_or(i64::MAX),
            id: run.id.clone(),
        }
    }

    /// The cursor `text` says, if it is one [`Display`](std::fmt::Display) made.
    pub fn parse(text: &str) -> Option<Self> {
        let (ms, id) = text.split_once('.')?;
        let submitted_ms = ms.parse::<i64>().ok().filter(|ms| *ms >= 0)?;
        let id_chars = |c: char| c.is_ascii_alphanumeric() || c == '-';
        (!id.is_empty() && id.len() <= 64 && id.chars().all(id_chars)).then(|| Self {
            submitted_ms,
            id: id.to_owned(),
        })
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.submitted_ms, self.id)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenancy::record::Counts;

    fn run(id: &str, tenant: &str, status: RunState, at: u64) -> RunRecord {
        RunRecord {
            id: id.into(),
            tenant: tenant.into(),
            status,
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
            store.insert(&run("a", "acme", RunState::Running, 1), "")?;
            store.insert(&run("b", "acme", RunState::Running, 2), "")?;
            store.insert(&run("c", "zeta", RunState::Running, 3), "")?;
            let mut done = run("a", "acme", RunState::Success, 1);
            done.counts.indexed = 7;
            done.finished_ms = Some(5);
            done.summary = Some(serde_json::json!({"connectors": []}));
            store.finish(&done)?;
        }
        let store = Store::open(dir.path())?;
        let (acme, next) = store.page(Some("acme"), None, 10)?;
        assert_eq!(next, None);
        assert_eq!(
            acme.iter()
                .map(|r| (r.id.as_str(), r.status))
                .collect::<Vec<_>>(),
            [("b", RunState::Lost), ("a", RunState::Success)]
        );
        assert_eq!(acme[1].counts.indexed, 7);
        assert!(acme[1].summary.is_some());
        assert_eq!(store.page(None, None, 10)?.0.len(), 3);
        assert_eq!(store.get("c")?.map(|r| r.tenant), Some("zeta".into()));
        assert_eq!(store.get("nope")?, None);
        Ok(())
    }

    fn finished(store: &Store, id: &str, tenant: &str, at: u64) -> Result<(), StoreError> {
        store.insert(&run(id, tenant, RunState::Running, at), "config")?;
        let mut done = run(id, tenant, RunState::Success, at);
        done.finished_ms = Some(at + 1);
        store.finish(&done)
    }

    #[test]
    fn pages_walk_every_run_once_newest_first_even_with_equal_times()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        // Three runs share each millisecond: the id breaks the tie.
        for n in 0..30u64 {
            let tenant = if n % 4 == 0 { "zeta" } else { "acme" };
            store.insert(
                &run(&format!("r{n:02}"), tenant, RunState::Running, n / 3),
                "",
            )?;
        }
        for (tenant, expected) in [(None, 30), (Some("acme"), 22)] {
            let mut seen = Vec::new();
            let mut cursor = None;
            loop {
                let (page, next) = store.page(tenant, cursor.as_ref(), 4)?;
                assert!(page.len() <= 4);
                seen.extend(page.into_iter().map(|r| (r.submitted_ms, r.id)));
                match next {
                    // The cursor survives its text form.
                    Some(next) => cursor = Cursor::parse(&next.to_string()),
                    None => break,
                }
                assert!(cursor.is_some());
            }
            let mut sorted = seen.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            sorted.dedup();
            assert_eq!(seen, sorted, "newest first, each once");
            assert_eq!(seen.len(), expected);
        }
        for bad in ["", "12", "x.r1", "-1.r1", "12.", "12.a/b", "12.a b"] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
        Ok(())
    }

    #[test]
    fn pruning_removes_a_tenants_oldest_finished_runs_and_never_a_live_one()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        // acme: a live run older than all, five finished; zeta: two finished.
        store.insert(&run("live", "acme", RunState::Running, 0), "")?;
        store.insert(&run("paused", "acme", RunState::Running, 1), "")?;
        store.set_status("paused", RunState::Paused)?;
        for n in 1..=5 {
            finished(&store, &format!("a{n}"), "acme", 10 * n)?;
        }
        finished(&store, "z1", "zeta", 1)?;
        finished(&store, "z2", "zeta", 2)?;
        let mut removed = store.prune(Some("acme"), 2, None)?;
        removed.sort_unstable();
        assert_eq!(removed, ["a1", "a2", "a3"]);
        let ids = |tenant| -> Result<Vec<String>, StoreError> {
            Ok(store
                .page(Some(tenant), None, 100)?
                .0
                .into_iter()
                .map(|r| r.id)
                .collect())
        };
        assert_eq!(ids("acme")?, ["a5", "a4", "paused", "live"]);
        assert_eq!(ids("zeta")?, ["z2", "z1"], "another tenant's runs stay");
        // By age: finished before 45 ms (a4 finished at 41).
        let mut removed = store.prune(None, 1000, Some(45))?;
        removed.sort_unstable();
        assert_eq!(removed, ["a4", "z1", "z2"]);
        assert_eq!(ids("acme")?, ["a5", "paused", "live"]);
        // Every tenant at once: acme keeps its newest finished run and its
        // live ones.
        assert_eq!(store.prune(None, 1, None)?, Vec::<String>::new());
        assert_eq!(ids("acme")?, ["a5", "paused", "live"]);
        Ok(())
    }
}
