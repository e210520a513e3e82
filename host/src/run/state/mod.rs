//! A connector's state during a run: what it sees (its committed state with
//! its own changes over it), the changes not yet committed, and the commit
//! of those whose documents are done.
//!
//! Each change waits for the position it was made at: how many documents the
//! connector had published. It is committed once every document before that
//! position is done (the accounting's watermark), so a crash keeps exactly
//! the state of finished work. Commits go to the store in order, a batch at
//! a time, as the run goes and when it ends however it ends.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

mod sqlite;
#[cfg(test)]
mod tests;

pub use sqlite::SqliteStates;

use super::publisher::Accounting;
use crate::core::state::{StateChange, StateError, StateStore};
use crate::plugin::ConnectorState;

/// How often a run commits what its documents allow.
const COMMIT_EVERY: Duration = Duration::from_millis(500);

/// One change not yet committed.
#[derive(Debug)]
struct Change {
    position: u64,
    key: String,
    value: Option<String>,
}

impl Change {
    fn bytes(&self) -> usize {
        self.key.len() + self.value.as_ref().map_or(0, String::len)
    }
}

#[derive(Debug, Default)]
struct Held {
    /// What `get` sees.
    view: BTreeMap<String, String>,
    /// Bytes of the view's keys and values.
    view_bytes: usize,
    /// Changes not yet committed, in the order made.
    changes: VecDeque<Change>,
    changes_bytes: usize,
}

/// One connector's state for one run.
pub(crate) struct Ledger {
    held: Mutex<Held>,
    store: Mutex<Box<dyn StateStore>>,
    accounting: Arc<Accounting>,
    /// Bytes the view and the uncommitted changes may hold together.
    limit: usize,
    full: bool,
    /// When the last commit ran.
    last_commit: Mutex<Instant>,
    committed: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").finish_non_exhaustive()
    }
}

fn entry_bytes(key: &str, value: &str) -> usize {
    key.len() + value.len()
}

impl Ledger {
    /// The state `store` keeps, for a connector whose documents
    /// `accounting` counts, within `limit` bytes.
    pub(crate) fn load(
        mut store: Box<dyn StateStore>,
        accounting: Arc<Accounting>,
        limit: usize,
        full: bool,
    ) -> Result<Self, StateError> {
        let mut held = Held::default();
        for (key, value) in store.load()? {
            held.view_bytes += entry_bytes(&key, &value);
            held.view.insert(key, value);
        }
        Ok(Self {
            held: Mutex::new(held),
            store: Mutex::new(store),
            accounting,
            limit,
            full,
            last_commit: Mutex::new(Instant::now()),
            committed: Default::default(),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes committed so far.
    pub(crate) fn committed(&self) -> u64 {
        self.committed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Changes made and not yet committed.
    pub(crate) fn uncommitted(&self) -> usize {
        self.held().changes.len()
    }

    /// Commit what the documents allow, when the last commit is old enough.
    pub(crate) fn commit_due(&self) -> Result<(), StateError> {
        let due = {
            let mut last = self
                .last_commit
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let due = last.elapsed() >= COMMIT_EVERY;
            if due {
                *last = Instant::now();
            }
            due
        };
        if due { self.commit() } else { Ok(()) }
    }

    /// Commit every change whose documents are all done. On an error the
    /// changes stay, to be tried again.
    pub(crate) fn commit(&self) -> Result<(), StateError> {
        let watermark = self.accounting.watermark();
        let ready: Vec<StateChange> = {
            let held = self.held();
            held.changes
                .iter()
                .take_while(|c| c.position <= watermark)
                .map(|c| (c.key.clone(), c.value.clone()))
                .collect()
        };
        if ready.is_empty() {
            return Ok(());
        }
        self.store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .commit(&ready)?;
        let mut held = self.held();
        for _ in 0..ready.len() {
            if let Some(change) = held.changes.pop_front() {
                held.changes_bytes -= change.bytes();
            }
        }
        self.committed
            .fetch_add(ready.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

impl ConnectorState for Ledger {
    fn get(&self, key: &str) -> Option<String> {
        self.held().view.get(key).cloned()
    }

    fn list(&self, after: Option<&str>, limit: usize) -> Vec<(String, String)> {
        use std::ops::Bound;
        let held = self.held();
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        held.view
            .range::<str, _>((from, Bound::Unbounded))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn size(&self) -> (u64, u64) {
        let held = self.held();
        (held.view.len() as u64, held.view_bytes as u64)
    }

    fn change(&self, key: &str, value: Option<&str>) -> Result<(), String> {
        let position = self.accounting.position();
        let mut held = self.held();
        let old = held.view.get(key).map_or(0, |v| entry_bytes(key, v));
        let new = value.map_or(0, |v| entry_bytes(key, v));
        // A change made at the same position as the last one of its key
        // replaces it: they would be committed together.
        let last = held
            .changes
            .back()
            .filter(|c| c.position == position && c.key == key);
        let replaces = last.is_some();
        let replaced_bytes = last.map_or(0, Change::bytes);
        let change_bytes = key.len() + value.map_or(0, str::len);
        let view_bytes = held.view_bytes - old + new;
        let changes_bytes = held.changes_bytes - replaced_bytes + change_bytes;
        if view_bytes + changes_bytes > self.limit {
            return Err(format!(
                "the connector's state would hold {} bytes (its keys and values, {view_bytes}, and the changes not yet committed, {changes_bytes}), over limits.max_state_mib = {}",
                view_bytes + changes_bytes,
                self.limit >> 20
            ));
        }
        match value {
            Some(value) => held.view.insert(key.to_owned(), value.to_owned()),
            None => held.view.remove(key),
        };
        held.view_bytes = view_bytes;
        held.changes_bytes = changes_bytes;
        let change = Change {
            position,
            key: key.to_owned(),
            value: value.map(str::to_owned),
        };
        if let Some(last) = held.changes.back_mut().filter(|_| replaces) {
            *last = change;
        } else {
            held.changes.push_back(change);
        }
        Ok(())
    }

    fn full_sync(&self) -> bool {
        self.full
    }
}
