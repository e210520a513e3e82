//! A connector's state during a run: what it sees (its committed state with
//! its own changes over it), the changes not yet committed, and the commit
//! of those whose documents are done.
//!
//! Each change waits for the position it was made at: how many documents the
//! connector had published. It is committed once every document before that
//! position is done (the accounting's watermark), so a crash keeps exactly
//! the state of finished work. Commits go to the store in order, a batch at
//! a time, as the run goes and when it ends however it ends.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

mod sqlite;
#[cfg(test)]
mod tests;

pub use sqlite::SqliteStates;

use super::accounting::Accounting;
use crate::core::state::{HeldState, StateChange, StateError, StateStore};
use crate::plugin::ConnectorState;

/// How often a run commits what its documents allow.
const COMMIT_EVERY: Duration = Duration::from_millis(500);

/// Most changes handed to the store in one commit: a run with many ready
/// changes commits them in slices, so the copy a commit makes stays small
/// whatever the state holds.
const COMMIT_SLICE: usize = 4096;

/// One connector's state for one run.
pub(crate) struct Ledger {
    held: Mutex<HeldState>,
    store: Mutex<Box<dyn StateStore>>,
    accounting: Arc<Accounting>,
    /// Bytes the view and the uncommitted changes may hold together, as
    /// the host spends them (see [`HeldState`]).
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
        let mut held = HeldState::default();
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
        Self::over(HeldState::default(), store, accounting, limit, full, true)
    }

    /// `held` over `store`; with `reset`, what the store holds is set aside.
    fn over(
        held: HeldState,
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

    fn held(&self) -> std::sync::MutexGuard<'_, HeldState> {
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
        self.held().change_at(key, value, position, self.limit)
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
            let (ready, written): (Vec<StateChange>, Vec<u64>) =
                self.held().ready(watermark, COMMIT_SLICE);
            if ready.is_empty() {
                return Ok(());
            }
            // The state set aside goes as the first change comes.
            self.settle_reset()?;
            self.store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .commit(&ready)?;
            // Those written are a prefix of the queue, each as it was when
            // copied (a change replaced meanwhile has a new number).
            let removed = self.held().written(written);
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
