//! Children follow their parent: when a published document of a syncing
//! connector (a *root*) is done, the children an earlier version of it made
//! and this one did not are deleted from the index.
//!
//! Every CREATE event names the root its child descends from
//! ([`Event::root`](crate::core::event::Event::root)). While a root is
//! pending, the runner collects the children its version makes. When its
//! last pending version ends:
//! - FINISH or DROP (the version went through its stages): the children
//!   the host's `#children` state kept for it and that this version did not
//!   make are *stale*. A deletion marker for each is held at the root's
//!   publish position (so no state change made after the root is committed
//!   before they are done) and queued; the runner's thread publishes them
//!   without waiting for room ([`Family::flush`]). The root's key is set to
//!   what this version made, at the position after the root: it is
//!   committed once the root and the markers are done. A root's own
//!   deletion marker makes no children: all of its kept ones go.
//! - FAIL: nothing is deleted (the version may have stopped before its
//!   children were made); the key keeps the earlier children and those this
//!   version made, so a later version deletes any it does not make again.
//!
//! Two versions of one root pending at once in a run are taken together:
//! their children are collected until the last ends; those only the older
//! made stay kept, and go when a later run's version does not make them.

mod codec;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::StopReason;
use super::accounting::{Accounting, Children, Skip};
use super::state::Ledger;
use crate::config::ConnectorConfig;
use crate::core::document::Document;
use crate::core::event::EventKind;
use crate::core::state::{HostPart, StateStores, SyncScope};
use crate::messenger::{MessengerError, PublisherMessenger};
use crate::plugin::ConnectorState;

/// Open the children kept for syncing connector `c` (its sync `scope`,
/// its state `state`) and follow them in this run: `accounting` tells the
/// family of CREATEs and of roots done, and `state` commits them first.
pub(crate) fn open(
    states: &dyn StateStores,
    scope: &SyncScope,
    c: &ConnectorConfig,
    accounting: &Arc<Accounting>,
    state: &Ledger,
    run_id: &str,
) -> Result<(), StopReason> {
    let unreadable = |e: crate::core::state::StateError| {
        StopReason::from(format!(
            "the children kept for sync `{scope}` ({}) cannot be read: {e}",
            states.describe(&c.pipeline)
        ))
    };
    let store = states
        .open(
            &c.pipeline,
            &scope.part(HostPart::Children).within_pipeline(),
        )
        .map_err(unreadable)?;
    // Bounded as the connector's own state is, by limits.max_state_mib.
    let kept = Ledger::load(
        store,
        Arc::clone(accounting),
        c.plugin.limits.max_state_bytes(),
        false,
    )
    .map_err(unreadable)?;
    let kept = Arc::new(kept);
    state.commit_first(Arc::clone(&kept));
    let _ = accounting
        .family
        .set(Arc::new(Family::new(kept as Arc<dyn Kept>, run_id)));
    Ok(())
}

impl Kept for Ledger {
    fn get(&self, root: &str) -> Option<String> {
        ConnectorState::get(self, root)
    }
    fn set(&self, root: &str, value: Option<&str>, position: u64) -> Result<(), String> {
        self.change_at(root, value, position)
    }
}

/// Where the children of each root are kept between runs: the host's
/// `#children` state of the connector.
pub(crate) trait Kept: Send + Sync {
    /// What is kept for `root`.
    fn get(&self, root: &str) -> Option<String>;
    /// Keep `value` for `root` (remove it with `None`) once every document
    /// published before `position` is done; or say why it cannot be kept.
    fn set(&self, root: &str, value: Option<&str>, position: u64) -> Result<(), String>;
}

/// The children made so far by a root's pending versions.
#[derive(Debug, Default)]
struct Made {
    children: Vec<String>,
    /// A version of it failed.
    failed: bool,
}

#[derive(Debug, Default)]
struct Inner {
    /// Per pending root that made children (or whose version failed).
    made: foldhash::HashMap<String, Made>,
    /// Markers held and not yet published, oldest first.
    queue: VecDeque<String>,
    /// Markers pending: the root of each, and the position its key waits for.
    markers: foldhash::HashMap<String, (String, u64)>,
    /// Why the run must stop: the children could not be kept.
    error: Option<String>,
    /// Markers made in this run.
    deleted: u64,
}

/// One syncing connector's children during a run.
pub(crate) struct Family {
    kept: Arc<dyn Kept>,
    run_id: String,
    /// Publications an earlier runner of a resumed run made: a marker among
    /// them is pending already, and not published again.
    skip: OnceLock<Arc<Skip>>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family").finish_non_exhaustive()
    }
}

impl Family {
    pub(crate) fn new(kept: Arc<dyn Kept>, run_id: &str) -> Self {
        Self {
            kept,
            run_id: run_id.to_owned(),
            skip: OnceLock::new(),
            inner: Mutex::default(),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run resumes one an earlier runner started: what it published.
    pub(crate) fn resumed(&self, skip: &Arc<Skip>) {
        let _ = self.skip.set(Arc::clone(skip));
    }

    /// `child` was made from pending `root` (called under the accounting's
    /// lock).
    pub(crate) fn created(&self, root: &str, child: &str) {
        let mut inner = self.inner();
        match inner.made.get_mut(root) {
            Some(made) => made.children.push(child.to_owned()),
            None => {
                inner.made.insert(
                    root.to_owned(),
                    Made {
                        children: vec![child.to_owned()],
                        failed: false,
                    },
                );
            }
        }
    }

    /// A version of `root`, published at `position`, ended with `kind`;
    /// `pending` whether another version of it still is, `next` the next
    /// publish position. The ids of the markers to hold at `position`
    /// (called under the accounting's lock, which holds them). One of this
    /// family's markers ended instead: a FINISH counts in `deleted`; a
    /// FAIL keeps its child for the root again, so a later version deletes
    /// it.
    pub(crate) fn ended(
        &self,
        root: &str,
        kind: EventKind,
        position: u64,
        pending: bool,
        next: u64,
        deleted: &std::sync::atomic::AtomicU64,
    ) -> Vec<String> {
        let mut inner = self.inner();
        if let Some((parent, at)) = inner.markers.remove(root) {
            match kind {
                EventKind::Finish => {
                    deleted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                EventKind::Fail => self.keep_again(&mut inner, &parent, root, at),
                EventKind::Drop | EventKind::Create => {}
            }
            return Vec::new();
        }
        if pending {
            if kind == EventKind::Fail {
                inner.made.entry(root.to_owned()).or_default().failed = true;
            }
            return Vec::new();
        }
        let made = inner.made.remove(root).unwrap_or_default();
        let failed = made.failed || kind == EventKind::Fail;
        let old = self.kept.get(root);
        if old.is_none() && made.children.is_empty() {
            return Vec::new();
        }
        let kept = match old.as_deref().map(|v| codec::decode(root, v)).transpose() {
            Ok(kept) => kept.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(
                    root = %crate::core::text::for_log(root),
                    error = %e,
                    "the children kept for a document cannot be read; they are forgotten (a full sync removes any left in the index)"
                );
                Vec::new()
            }
        };
        let made_set: foldhash::HashSet<&str> = made.children.iter().map(String::as_str).collect();
        let (value, stale) = if failed {
            let mut all = kept;
            all.extend(made.children.iter().cloned());
            (codec::encode(root, &all), Vec::new())
        } else {
            let mut stale: Vec<String> = kept
                .into_iter()
                .filter(|id| !made_set.contains(id.as_str()))
                .collect();
            stale.sort_unstable();
            stale.dedup();
            (codec::encode(root, &made.children), stale)
        };
        // Markers an earlier runner of the run published are pending
        // already, at positions of their own: the key then waits for
        // everything published so far.
        let mut position_after = position + 1;
        let mut held = Vec::with_capacity(stale.len());
        let mut skipped = Vec::new();
        for id in stale {
            if self.skip.get().is_some_and(|skip| skip.take(&id)) {
                position_after = next;
                skipped.push(id);
            } else {
                held.push(id);
            }
        }
        if value != old
            && let Err(e) = self.kept.set(root, value.as_deref(), position_after)
        {
            // Nothing is deleted that the state cannot say was: the run
            // stops, the key as it was.
            inner.error.get_or_insert_with(|| {
                format!(
                    "the children of `{}` cannot be kept: {e}",
                    crate::core::text::for_log(root)
                )
            });
            return Vec::new();
        }
        inner.deleted += held.len() as u64;
        inner.queue.extend(held.iter().cloned());
        for id in held.iter().chain(&skipped) {
            inner
                .markers
                .insert(id.clone(), (root.to_owned(), position_after));
        }
        held
    }

    /// The marker of `child` of `root` failed: the child may still be in
    /// the index, so it is kept for `root` again (at `at`, where the key's
    /// change waits).
    fn keep_again(&self, inner: &mut Inner, root: &str, child: &str, at: u64) {
        let mut kept = self
            .kept
            .get(root)
            .and_then(|v| codec::decode(root, &v).ok())
            .unwrap_or_default();
        kept.push(child.to_owned());
        if let Err(e) = self
            .kept
            .set(root, codec::encode(root, &kept).as_deref(), at)
        {
            inner.error.get_or_insert_with(|| {
                format!(
                    "the children of `{}` cannot be kept: {e}",
                    crate::core::text::for_log(root)
                )
            });
        }
    }

    /// Why the run must stop, if it must.
    pub(crate) fn error(&self) -> Option<String> {
        self.inner().error.clone()
    }

    /// Markers made in this run for children of earlier versions.
    pub(crate) fn deleted(&self) -> u64 {
        self.inner().deleted
    }

    /// Say what was deleted, as the connector's run ends.
    pub(crate) fn report(&self) {
        let deleted = self.deleted();
        if deleted > 0 {
            tracing::info!(
                deleted,
                "children that earlier versions of their documents made and the new ones did not were deleted"
            );
        }
    }

    /// Publish the markers waiting, as far as the pipeline has room now:
    /// never waits for room (the thread that calls it also reads the
    /// events that make room). `Err` is why the run must stop.
    pub(crate) fn flush(
        &self,
        messenger: &dyn PublisherMessenger,
        accounting: &Accounting,
    ) -> Result<(), String> {
        if let Some(error) = self.error() {
            return Err(error);
        }
        loop {
            let Some(id) = self.inner().queue.pop_front() else {
                return Ok(());
            };
            let mut marker = Document::new(id.clone());
            marker.set_deleted(true);
            marker.set_run_id(Some(self.run_id.clone()));
            match messenger.send_for_processing(marker, Duration::ZERO) {
                Ok(None) => {
                    accounting
                        .published
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(Some(_)) => {
                    // No room now: the next call tries again.
                    self.inner().queue.push_front(id);
                    return Ok(());
                }
                Err(MessengerError::Refused(reason)) => {
                    // It fails alone, as a refused document does.
                    let removed = self.inner().markers.remove(&id);
                    if let Some((root, at)) = removed {
                        self.keep_again(&mut self.inner(), &root, &id, at);
                    }
                    accounting.unpublished(&id);
                    accounting.refused();
                    tracing::warn!(%reason, "a deletion marker for a child of an earlier version was refused");
                }
                Err(e) => {
                    return Err(format!(
                        "cannot publish the deletion markers of children of earlier versions: {e}"
                    ));
                }
            }
        }
    }
}

impl Children for Family {
    fn created(&self, root: &str, child: &str) {
        Family::created(self, root, child);
    }

    fn ended(
        &self,
        root: &str,
        kind: EventKind,
        position: u64,
        pending: bool,
        next: u64,
        deleted: &std::sync::atomic::AtomicU64,
    ) -> Vec<String> {
        Family::ended(self, root, kind, position, pending, next, deleted)
    }

    fn resumed(&self, skip: &Arc<Skip>) {
        Family::resumed(self, skip);
    }

    fn flush(
        &self,
        messenger: &dyn PublisherMessenger,
        accounting: &Accounting,
    ) -> Result<(), String> {
        Family::flush(self, messenger, accounting)
    }

    fn report(&self) {
        Family::report(self);
    }
}
