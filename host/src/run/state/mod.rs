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

mod inspect;
mod sqlite;
#[cfg(test)]
mod tests;

pub use inspect::{
    DEFAULT_SHOWN_KEYS, MAX_SHOWN_KEYS, ShownKey, StateInspectError, StateQuery, SyncOf, SyncReset,
    SyncState,
};
pub use sqlite::SqliteStates;

use super::publisher::Accounting;
use crate::core::limit::Limit;
use crate::core::state::{
    CHANGE_ENTRY_BYTES, StateChange, StateError, StateStore, VIEW_ENTRY_BYTES,
};
use crate::plugin::ConnectorState;

/// How often a run commits what its documents allow.
const COMMIT_EVERY: Duration = Duration::from_millis(500);

/// Most changes handed to the store in one commit: a run with many ready
/// changes commits them in slices, so the copy a commit makes stays small
/// whatever the state holds.
const COMMIT_SLICE: usize = 4096;

/// The bytes the host holds for a key of the view.
fn view_entry(key: &str, value: &str) -> usize {
    key.len() + value.len() + VIEW_ENTRY_BYTES
}

/// One change not yet committed.
#[derive(Debug)]
struct Change {
    /// Its number among the ledger's changes, new whenever it is made or
    /// replaced: a commit removes only the changes it handed the store, by
    /// number, so one replaced while the store wrote it stays.
    seq: u64,
    position: u64,
    key: String,
    value: Option<String>,
}

impl Change {
    /// The bytes the host holds for it.
    fn bytes(&self) -> usize {
        change_entry(&self.key, self.value.as_deref())
    }
}

/// The bytes the host holds for a change of `key` to `value`.
fn change_entry(key: &str, value: Option<&str>) -> usize {
    key.len() + value.map_or(0, str::len) + CHANGE_ENTRY_BYTES
}

#[derive(Debug, Default)]
struct Held {
    /// What `get` sees.
    view: BTreeMap<String, String>,
    /// Bytes of the view's keys and values, as `size` answers.
    view_text: usize,
    /// Bytes the host holds for the view (its text and each entry's cost).
    view_bytes: usize,
    /// Changes not yet committed, in the order made.
    changes: VecDeque<Change>,
    /// Bytes the host holds for them.
    changes_bytes: usize,
    /// The number the next change gets.
    next_seq: u64,
}

impl Held {
    /// Take in one change of the state being loaded, refusing it when the
    /// view would hold more than `limit` bytes (what the host spends, as a
    /// change is counted), naming its key.
    fn load(&mut self, (key, value): StateChange, limit: usize) -> Result<(), StateError> {
        let old = self.view.get(&key);
        let old_text = old.map_or(0, |v| key.len() + v.len());
        let old_bytes = old.map_or(0, |v| view_entry(&key, v));
        let new_bytes = value.as_deref().map_or(0, |v| view_entry(&key, v));
        let bytes = self.view_bytes - old_bytes + new_bytes;
        if bytes > limit {
            return Err(StateError::new(format!(
                "it holds more than {} = {} as the host counts it (each key's key and value and {VIEW_ENTRY_BYTES} bytes a key): {bytes} bytes with {} keys read when key `{}` came; it was kept under a larger limit or changed by hand: raise the limit, or clear the state (its connector then sends everything again)",
                Limit::MaxStateMib,
                limit >> 20,
                self.view.len() + usize::from(old.is_none()),
                crate::core::text::for_log(&key),
            )));
        }
        self.view_text =
            self.view_text - old_text + value.as_ref().map_or(0, |v| key.len() + v.len());
        self.view_bytes = bytes;
        match value {
            Some(value) => self.view.insert(key, value),
            None => self.view.remove(&key),
        };
        Ok(())
    }
}

/// One connector's state for one run.
pub(crate) struct Ledger {
    held: Mutex<Held>,
    store: Mutex<Box<dyn StateStore>>,
    accounting: Arc<Accounting>,
    /// Bytes the view and the uncommitted changes may hold together, as
    /// the host spends them (see [`VIEW_ENTRY_BYTES`] and [`CHANGE_ENTRY_BYTES`]).
    limit: usize,
    full: bool,
    /// When the last commit ran.
    last_commit: Mutex<Instant>,
    committed: std::sync::atomic::AtomicU64,
    /// The store still holds state this run set aside (the source changed):
    /// it is cleared as the first change is committed, or when the run
    /// completes, never before, so a run that fails first keeps it.
    reset: std::sync::atomic::AtomicBool,
    /// A host part committed before this state, to the same watermark, in
    /// each commit (the children kept per parent: never behind the
    /// connector's state that says the parent is done).
    first: std::sync::OnceLock<Arc<Ledger>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").finish_non_exhaustive()
    }
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
        // Bounded as it is read, a key at a time: refused before a state
        // past the limit is in memory.
        store.load_each(&mut |change| held.load(change, limit))?;
        Ok(Self::over(held, store, accounting, limit, full, false))
    }

    /// An empty state over `store`, whose own state is set aside: the store
    /// is cleared as this state's first change is committed (or by
    /// [`settle_reset`](Self::settle_reset)), not before.
    pub(crate) fn set_aside(
        store: Box<dyn StateStore>,
        accounting: Arc<Accounting>,
        limit: usize,
        full: bool,
    ) -> Self {
        Self::over(Held::default(), store, accounting, limit, full, true)
    }

    /// `held` over `store`; with `reset`, what the store holds is set aside.
    fn over(
        held: Held,
        store: Box<dyn StateStore>,
        accounting: Arc<Accounting>,
        limit: usize,
        full: bool,
        reset: bool,
    ) -> Self {
        Self {
            held: Mutex::new(held),
            store: Mutex::new(store),
            accounting,
            limit,
            full,
            last_commit: Mutex::new(Instant::now()),
            committed: Default::default(),
            reset: std::sync::atomic::AtomicBool::new(reset),
            first: std::sync::OnceLock::new(),
        }
    }

    /// Whether the state set aside is still in the store.
    pub(crate) fn reset_pending(&self) -> bool {
        self.reset.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Clear the state set aside, if it is still in the store: the run
    /// completed, so this state (even with no change) replaces it.
    pub(crate) fn settle_reset(&self) -> Result<(), StateError> {
        if self.reset_pending() {
            self.store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear()?;
            self.reset
                .store(false, std::sync::atomic::Ordering::Release);
        }
        Ok(())
    }

    /// Commit `part` before this state, to the same watermark, whenever
    /// this state commits.
    pub(crate) fn commit_first(&self, part: Arc<Ledger>) {
        let _ = self.first.set(part);
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

    /// Set (`Some`) or remove (`None`) `key`, committed once every document
    /// published before `position` is done. The queue stays in position
    /// order: a change made for an earlier position (the host's, for a
    /// document published earlier) goes before those made after it.
    pub(crate) fn change_at(
        &self,
        key: &str,
        value: Option<&str>,
        position: u64,
    ) -> Result<(), String> {
        let mut held = self.held();
        let old = held.view.get(key);
        let old_text = old.map_or(0, |v| key.len() + v.len());
        let old_bytes = old.map_or(0, |v| view_entry(key, v));
        let new_text = value.map_or(0, |v| key.len() + v.len());
        let new_bytes = value.map_or(0, |v| view_entry(key, v));
        // A change made at the same position as the last one of its key
        // replaces it: they would be committed together.
        let at = held.changes.partition_point(|c| c.position <= position);
        let last = at
            .checked_sub(1)
            .and_then(|i| held.changes.get(i))
            .filter(|c| c.position == position && c.key == key);
        let replaces = last.is_some();
        let replaced_bytes = last.map_or(0, Change::bytes);
        let change_bytes = change_entry(key, value);
        let view_bytes = held.view_bytes - old_bytes + new_bytes;
        let changes_bytes = held.changes_bytes - replaced_bytes + change_bytes;
        let total = view_bytes + changes_bytes;
        // Checked before anything is taken in. A change that does not grow
        // what is held (a removal, a shorter value) is let through even
        // over the limit (state loaded near it leaves little room for the
        // changes' own cost): it is how a connector gets back under it.
        if total > self.limit && total > held.view_bytes + held.changes_bytes {
            return Err(format!(
                "the connector's state would hold {total} bytes in the host ({} keys: their keys and values and {VIEW_ENTRY_BYTES} bytes a key, {view_bytes}; the changes not yet committed, {CHANGE_ENTRY_BYTES} bytes each beside their text, {changes_bytes}), over {} = {}",
                held.view.len() + usize::from(old.is_none() && value.is_some()),
                Limit::MaxStateMib,
                self.limit >> 20
            ));
        }
        match value {
            Some(value) => held.view.insert(key.to_owned(), value.to_owned()),
            None => held.view.remove(key),
        };
        held.view_text = held.view_text - old_text + new_text;
        held.view_bytes = view_bytes;
        held.changes_bytes = changes_bytes;
        let seq = held.next_seq;
        held.next_seq += 1;
        let change = Change {
            seq,
            position,
            key: key.to_owned(),
            value: value.map(str::to_owned),
        };
        if replaces {
            held.changes[at - 1] = change;
        } else {
            held.changes.insert(at, change);
        }
        Ok(())
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

    /// Commit every change whose documents are all done, in order, a
    /// slice of at most [`COMMIT_SLICE`] at a time (each slice atomic, so a
    /// crash keeps a prefix of them). On an error the changes not committed
    /// stay, to be tried again.
    pub(crate) fn commit(&self) -> Result<(), StateError> {
        let watermark = self.accounting.watermark();
        if let Some(first) = self.first.get() {
            first.commit_upto(watermark)?;
        }
        self.commit_upto(watermark)
    }

    /// [`commit`](Self::commit) the changes made at `watermark` or before.
    fn commit_upto(&self, watermark: u64) -> Result<(), StateError> {
        loop {
            // The changes are copied and the lock let go while the store
            // writes them: the connector goes on changing its state. Its
            // change may replace the last one copied (same key and
            // position); the replacement has a new number, so it is not
            // removed below as written, and the next commit writes it.
            let (ready, written): (Vec<StateChange>, Vec<u64>) = {
                let held = self.held();
                held.changes
                    .iter()
                    .take_while(|c| c.position <= watermark)
                    .take(COMMIT_SLICE)
                    .map(|c| ((c.key.clone(), c.value.clone()), c.seq))
                    .unzip()
            };
            if ready.is_empty() {
                return Ok(());
            }
            // The state set aside goes as the first change comes.
            self.settle_reset()?;
            self.store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .commit(&ready)?;
            let mut held = self.held();
            // Those written are a prefix of the queue, each as it was when
            // copied (a change replaced meanwhile has a new number).
            let mut removed = 0u64;
            for seq in written {
                let Some(change) = held.changes.pop_front_if(|c| c.seq == seq) else {
                    break;
                };
                held.changes_bytes -= change.bytes();
                removed += 1;
            }
            if held.changes.len() * 4 < held.changes.capacity() {
                held.changes.shrink_to_fit();
            }
            drop(held);
            self.committed
                .fetch_add(removed, std::sync::atomic::Ordering::Relaxed);
            if ready.len() < COMMIT_SLICE {
                return Ok(());
            }
        }
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
        (held.view.len() as u64, held.view_text as u64)
    }

    fn change(&self, key: &str, value: Option<&str>) -> Result<(), String> {
        self.change_at(key, value, self.accounting.position())
    }

    fn full_sync(&self) -> bool {
        self.full
    }
}
