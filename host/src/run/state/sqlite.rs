//! Local mode's state store: one SQLite file, a table of (scope, key, value).
//!
//! The file is made by the first commit of a connector's own state that
//! keeps something: a store that is only read (a run that finds no state,
//! `weir state show`) or cleared leaves no file behind where there was
//! none. The host's parts of a sync (`<scope>#meta`, `#children`) make no
//! file on their own either: while there is none, what they commit is held
//! in memory and written with the first commit that makes it. A connector
//! that keeps no keys of its own (every run of it a full sync) leaves no
//! file; its sweeps need none.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, params};

use crate::core::state::{StateChange, StateError, StateStore, StateStores};

/// The SQLite file every connector of a config keeps its state in.
#[derive(Debug, Clone)]
pub struct SqliteStates {
    path: PathBuf,
    held: Arc<Mutex<Held>>,
}

/// What host parts committed while the file did not exist: per scope,
/// each key's value.
type Held = HashMap<String, BTreeMap<String, String>>;

impl SqliteStates {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            held: Arc::default(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

struct SqliteStore {
    path: PathBuf,
    /// None until the file exists (or a commit makes it).
    db: Option<Connection>,
    scope: String,
    /// A host part of a sync (`#meta`, `#children`): makes no file.
    host_part: bool,
    held: Arc<Mutex<Held>>,
}

fn failed(path: &Path, e: impl std::fmt::Display) -> StateError {
    StateError::new(format!("connector state {}: {e}", path.display()))
}

/// The file at `path`, opened (made when `create`), with its table.
fn connect(path: &Path, create: bool) -> Result<Connection, StateError> {
    if create && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| failed(path, e))?;
    }
    let flags = if create {
        rusqlite::OpenFlags::default()
    } else {
        rusqlite::OpenFlags::default() - rusqlite::OpenFlags::SQLITE_OPEN_CREATE
    };
    let db = Connection::open_with_flags(path, flags).map_err(|e| failed(path, e))?;
    db.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| failed(path, e))?;
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
    .map_err(|e| failed(path, e))?;
    Ok(db)
}

impl StateStores for SqliteStates {
    fn open(&self, pipeline: &str, connector: &str) -> Result<Box<dyn StateStore>, StateError> {
        // An existing file is opened (and checked) at once; a missing one
        // is made by the first commit that keeps something.
        let db = if self.path.exists() {
            Some(connect(&self.path, false)?)
        } else {
            None
        };
        Ok(Box::new(SqliteStore {
            path: self.path.clone(),
            db,
            scope: format!("{pipeline}/{connector}"),
            host_part: connector.contains('#'),
            held: Arc::clone(&self.held),
        }))
    }

    fn describe(&self, _pipeline: &str) -> String {
        self.path.display().to_string()
    }

    fn exists(&self, _pipeline: &str) -> Result<bool, StateError> {
        Ok(self.path.exists())
    }
}

impl SqliteStore {
    fn failed(&self, e: rusqlite::Error) -> StateError {
        StateError::new(format!("connector state of `{}`: {e}", self.scope))
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The file's connection: made when `create`, else none while the file
    /// does not exist (another store of it may have made it since).
    fn db(&mut self, create: bool) -> Result<Option<&mut Connection>, StateError> {
        if self.db.is_none() && (create || self.path.exists()) {
            self.db = Some(connect(&self.path, create)?);
        }
        Ok(self.db.as_mut())
    }
}

/// Write `changes` of `scope` in one transaction.
fn write<'a>(
    db: &mut Connection,
    changes: impl IntoIterator<Item = (&'a str, &'a str, Option<&'a str>)>,
) -> rusqlite::Result<()> {
    let tx = db.transaction()?;
    {
        let mut set = tx.prepare_cached(
            "INSERT INTO connector_state (scope, key, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
        )?;
        let mut remove =
            tx.prepare_cached("DELETE FROM connector_state WHERE scope = ?1 AND key = ?2")?;
        for (scope, key, value) in changes {
            match value {
                Some(value) => set.execute(params![scope, key, value])?,
                None => remove.execute(params![scope, key])?,
            };
        }
    }
    tx.commit()
}

impl StateStore for SqliteStore {
    fn load(&mut self) -> Result<Vec<(String, String)>, StateError> {
        let mut rows = Vec::new();
        self.load_each(&mut |(key, value)| {
            if let Some(value) = value {
                rows.push((key, value));
            }
            Ok(())
        })?;
        Ok(rows)
    }

    /// A row at a time, so a refusal comes before the rest is read.
    fn load_each(
        &mut self,
        each: &mut dyn FnMut(StateChange) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let scope = self.scope.clone();
        let failed = |e| StateError::new(format!("connector state of `{scope}`: {e}"));
        let held: Vec<(String, String)> = self
            .held()
            .get(&scope)
            .map(|kept| kept.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let Some(db) = self.db(false)? else {
            return held
                .into_iter()
                .try_for_each(|(key, value)| each((key, Some(value))));
        };
        let mut select = db
            .prepare("SELECT key, value FROM connector_state WHERE scope = ?1")
            .map_err(failed)?;
        let mut rows = select.query([&scope]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            let key: String = row.get(0).map_err(failed)?;
            let value: String = row.get(1).map_err(failed)?;
            each((key, Some(value)))?;
        }
        Ok(())
    }

    fn commit(&mut self, changes: &[StateChange]) -> Result<(), StateError> {
        if self.db.is_none() {
            // Whether the file exists, and what is held, decided under one
            // lock: what a host part holds is never left behind by the
            // commit that makes the file.
            let held = Arc::clone(&self.held);
            let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
            if !self.path.exists() {
                let keeps = changes.iter().any(|(_, value)| value.is_some());
                if self.host_part || !keeps {
                    // Nothing of the connector's own to keep: no file.
                    let kept = held.entry(self.scope.clone()).or_default();
                    for (key, value) in changes {
                        match value {
                            Some(value) => kept.insert(key.clone(), value.clone()),
                            None => kept.remove(key),
                        };
                    }
                    held.retain(|_, kept| !kept.is_empty());
                    return Ok(());
                }
                // The first commit that keeps something makes the file, with
                // what the host parts held.
                let scope = self.scope.clone();
                let db = connect(&self.path, true)?;
                let db = self.db.insert(db);
                let earlier = held.iter().flat_map(|(scope, kept)| {
                    kept.iter()
                        .map(|(k, v)| (scope.as_str(), k.as_str(), Some(v.as_str())))
                });
                let these = changes
                    .iter()
                    .map(|(k, v)| (scope.as_str(), k.as_str(), v.as_deref()));
                write(db, earlier.chain(these)).map_err(|e| self.failed(e))?;
                held.clear();
                return Ok(());
            }
        }
        let scope = self.scope.clone();
        let Some(db) = self.db(false)? else {
            return Ok(());
        };
        write(
            db,
            changes
                .iter()
                .map(|(k, v)| (scope.as_str(), k.as_str(), v.as_deref())),
        )
        .map_err(|e| self.failed(e))
    }

    fn clear(&mut self) -> Result<(), StateError> {
        let scope = self.scope.clone();
        self.held().remove(&scope);
        let Some(db) = self.db(false)? else {
            return Ok(());
        };
        db.execute("DELETE FROM connector_state WHERE scope = ?1", [&scope])
            .map(drop)
            .map_err(|e| self.failed(e))
    }
}
