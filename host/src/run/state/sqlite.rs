//! Local mode's state store: one SQLite file, a table of (scope, key, value).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

use crate::core::state::{StateChange, StateError, StateStore, StateStores};

/// The SQLite file every connector of a config keeps its state in.
#[derive(Debug, Clone)]
pub struct SqliteStates {
    path: PathBuf,
}

impl SqliteStates {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }
}

struct SqliteStore {
    db: Connection,
    scope: String,
}

fn failed(path: &Path, e: impl std::fmt::Display) -> StateError {
    StateError::new(format!("connector state {}: {e}", path.display()))
}

impl StateStores for SqliteStates {
    fn open(&self, pipeline: &str, connector: &str) -> Result<Box<dyn StateStore>, StateError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| failed(&self.path, e))?;
        }
        let db = Connection::open(&self.path).map_err(|e| failed(&self.path, e))?;
        db.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| failed(&self.path, e))?;
        db.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS connector_state (
                 scope TEXT NOT NULL,
                 key TEXT NOT NULL,
                 value TEXT NOT NULL,
                 PRIMARY KEY (scope, key)
             ) WITHOUT ROWID;",
        )
        .map_err(|e| failed(&self.path, e))?;
        Ok(Box::new(SqliteStore {
            db,
            scope: format!("{pipeline}/{connector}"),
        }))
    }

    fn describe(&self, _pipeline: &str) -> String {
        self.path.display().to_string()
    }
}

impl SqliteStore {
    fn failed(&self, e: rusqlite::Error) -> StateError {
        StateError::new(format!("connector state of `{}`: {e}", self.scope))
    }
}

impl StateStore for SqliteStore {
    fn load(&mut self) -> Result<Vec<(String, String)>, StateError> {
        let mut select = self
            .db
            .prepare("SELECT key, value FROM connector_state WHERE scope = ?1")
            .map_err(|e| self.failed(e))?;
        let rows = select
            .query_map([&self.scope], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect);
        drop(select);
        rows.map_err(|e| self.failed(e))
    }

    /// A row at a time, so a refusal comes before the rest is read.
    fn load_each(
        &mut self,
        each: &mut dyn FnMut(StateChange) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let failed = |e| StateError::new(format!("connector state of `{}`: {e}", self.scope));
        let mut select = self
            .db
            .prepare("SELECT key, value FROM connector_state WHERE scope = ?1")
            .map_err(failed)?;
        let mut rows = select.query([&self.scope]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            let key: String = row.get(0).map_err(failed)?;
            let value: String = row.get(1).map_err(failed)?;
            each((key, Some(value)))?;
        }
        Ok(())
    }

    fn commit(&mut self, changes: &[StateChange]) -> Result<(), StateError> {
        let scope = self.scope.clone();
        let write = |db: &mut Connection| -> rusqlite::Result<()> {
            let tx = db.transaction()?;
            {
                let mut set = tx.prepare_cached(
                    "INSERT INTO connector_state (scope, key, value) VALUES (?1, ?2, ?3)
                     ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
                )?;
                let mut remove =
                    tx.prepare_cached("DELETE FROM connector_state WHERE scope = ?1 AND key = ?2")?;
                for (key, value) in changes {
                    match value {
                        Some(value) => set.execute(params![scope, key, value])?,
                        None => remove.execute(params![scope, key])?,
                    };
                }
            }
            tx.commit()
        };
        write(&mut self.db).map_err(|e| self.failed(e))
    }

    fn clear(&mut self) -> Result<(), StateError> {
        self.db
            .execute(
                "DELETE FROM connector_state WHERE scope = ?1",
                [&self.scope],
            )
            .map(drop)
            .map_err(|e| self.failed(e))
    }
}
