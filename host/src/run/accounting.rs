//! Publisher accounting: which documents of a connector are still pending
//! (from their publish, or CREATE for a child, until a terminal event), the
//! watermark a connector's state commits to, the counts a run reports, and
//! the publications an earlier runner of a resumed run made. A syncing
//! connector's children (`family/`) are told of CREATEs and of roots done
//! through [`Children`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::core::event::{Event, EventKind};
use crate::messenger::PublisherMessenger;

mod aside;

pub(crate) use aside::AsideSizes;

/// What the accounting tells a syncing connector's children (`family/`),
/// and what a connector's run asks of them.
pub(crate) trait Children: Send + Sync + std::fmt::Debug {
    /// `child` was made from pending `root` (called under the accounting's
    /// lock).
    fn created(&self, root: &str, child: &str);
    /// Root `root`'s version at `position` ended with `kind`: the deletion
    /// markers of its stale children, to hold at its position.
    fn ended(
        &self,
        root: &str,
        kind: EventKind,
        position: u64,
        pending: bool,
        next: u64,
        deleted: &AtomicU64,
    ) -> Vec<String>;
    /// A resumed run: publications an earlier runner made are `skip`ped.
    fn resumed(&self, skip: &Arc<Skip>);
    /// Publish the markers waiting, as far as the pipeline has room now;
    /// `Err` is why the run must stop.
    fn flush(
        &self,
        messenger: &dyn PublisherMessenger,
        accounting: &Accounting,
    ) -> Result<(), String>;
    /// Log what was deleted.
    fn report(&self);
}

/// What the accounting tells a streaming connector's deliveries
/// (`deliveries.rs`) of publish positions, under the accounting's lock (so
/// it must not block).
pub(crate) trait Positions: Send + Sync + std::fmt::Debug {
    /// A document was published at `position`.
    fn published(&self, position: u64);
    /// Another document (a child, a marker) is pending at `position`.
    fn held(&self, position: u64);
    /// A document pending at `position` is done; `failed` is its error
    /// when it failed.
    fn ended(&self, position: u64, failed: Option<&str>);
}

/// Pending documents and outcome counts for one connector.
///
/// A document is pending from its publish (or its CREATE, for a child) until
/// a terminal event (FINISH, FAIL, DROP). The connector is complete when
/// nothing is pending.
///
/// Events are counted per document of this run: an event of another run is
/// set aside. A terminal event for an id that is not pending is kept aside
/// too: it is either a child's, seen before its CREATE (the CREATE then
/// finds it), or a duplicate from at-least-once redelivery (it then never
/// holds up completion, and [`Accounting::settle`] counts it apart). A
/// terminal event that must follow CREATEs of its worker pass (see
/// [`Event::after_creates`]) waits until they are seen, its document pending.
#[derive(Debug, Default)]
pub(crate) struct Accounting {
    run_id: String,
    counts: Mutex<Counts>,
    /// Counted by the connector's thread, the rest by the runner's.
    pub(crate) published: crate::telemetry::Padded,
    pub(crate) created: AtomicU64,
    pub(crate) succeeded: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
    /// What kind of sync the connector's run is, for the summary.
    sync_note: Mutex<Option<String>>,
    /// Deletion markers done with FINISH: documents deleted.
    pub(crate) deleted: AtomicU64,
    /// A syncing connector's children, told of CREATEs and of roots done.
    pub(crate) family: std::sync::OnceLock<Arc<dyn Children>>,
    /// A streaming connector's deliveries, told of positions.
    pub(crate) positions: std::sync::OnceLock<Arc<dyn Positions>>,
    /// The run's trace, with this connector's name, when it keeps one.
    pub(crate) trace: std::sync::OnceLock<(Arc<super::trace::Trace>, String)>,
}

/// Randomly seeded maps: document ids come from sources, so no hash flooding.
#[derive(Debug, Default)]
struct Counts {
    /// Per pending id, the publish positions of its pending versions.
    pending: foldhash::HashMap<String, Held>,
    /// Every pending position, counted: its least is the watermark.
    live: std::collections::BTreeMap<u64, u32>,
    /// The position the next published document takes: how many were.
    next: u64,
    /// Terminal events for ids that were not pending, the CREATEs seen
    /// per worker pass, and terminal events waiting for more of them:
    /// settled as they age, so bounded however long the run goes.
    aside: aside::Aside,
    /// Terminal events settled as duplicates so far (as they aged aside).
    duplicates: u64,
    /// Events of other runs.
    foreign: u64,
    /// Pending deletion markers: their positions and ids.
    markers: foldhash::HashSet<(u64, Box<str>)>,
    /// Trace lines of the events counted under this lock, written once it
    /// is let go.
    traced: Vec<u8>,
}

/// What the accounting holds now: its pending documents and their
/// positions, and what it set aside (each bounded by the documents in
/// flight, or by the side tables' horizon).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Holding {
    pub(crate) pending: usize,
    pub(crate) positions: usize,
    pub(crate) markers: usize,
    pub(crate) aside: AsideSizes,
    /// Terminal events settled as duplicates so far.
    pub(crate) duplicates: u64,
    pub(crate) foreign: u64,
}

/// What a connector's events came to, duplicates apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Settled {
    /// Terminal events for documents already done, or never pending.
    pub(crate) duplicates: u64,
    /// Events of other runs.
    pub(crate) foreign: u64,
}

/// The publish positions of one id's pending versions, oldest first: a
/// published document's own, a child's the least pending when it was made
/// (at or before its parent's, so it holds back at least what its parent
/// did).
#[derive(Debug)]
struct Held {
    first: u64,
    rest: std::collections::VecDeque<u64>,
}

impl Counts {
    /// `id` is pending once more, at `position`.
    fn hold(&mut self, id: &str, position: u64) {
        match self.pending.get_mut(id) {
            Some(held) => held.rest.push_back(position),
            None => {
                self.pending.insert(
                    id.to_owned(),
                    Held {
                        first: position,
                        rest: std::collections::VecDeque::new(),
                    },
                );
            }
        }
        *self.live.entry(position).or_default() += 1;
    }

    /// One version of `id` is done (the oldest, or with `newest` the one
    /// just held); false when none was pending.
    fn release(&mut self, id: &str, newest: bool) -> bool {
        let Some(held) = self.pending.get_mut(id) else {
            return false;
        };
        let position = if newest {
            held.rest.pop_back()
        } else {
            held.rest
                .pop_front()
                .map(|next| std::mem::replace(&mut held.first, next))
        };
        let position = match position {
            Some(position) => position,
            None => {
                let first = held.first;
                self.pending.remove(id);
                first
            }
        };
        if let std::collections::btree_map::Entry::Occupied(mut live) = self.live.entry(position) {
            *live.get_mut() -= 1;
            if *live.get() == 0 {
                live.remove();
            }
        }
        true
    }

    /// Whether the oldest pending version of `id` is a deletion marker
    /// (then no longer kept as one: it is being released).
    fn take_marker(&mut self, id: &str) -> bool {
        let Some(position) = self.pending.get(id).map(|held| held.first) else {
            return false;
        };
        !self.markers.is_empty() && self.markers.remove(&(position, Box::from(id)))
    }

    /// `id`, held at `position`, is a deletion marker: its FINISH is a delete.
    fn marker(&mut self, id: &str, position: u64) {
        self.markers.insert((position, id.into()));
    }

    /// The least position still pending, else the next to be published:
    /// every document published before it is done.
    fn watermark(&self) -> u64 {
        self.live.keys().next().copied().unwrap_or(self.next)
    }
}

impl Accounting {
    pub(crate) fn new(run_id: &str) -> Self {
        Self {
            run_id: run_id.to_owned(),
            ..Self::default()
        }
    }

    /// [`Self::new`], its side tables settled after `horizon` events.
    #[cfg(test)]
    pub(crate) fn with_horizon(run_id: &str, horizon: u64) -> Self {
        let accounting = Self::new(run_id);
        accounting.lock().aside = aside::Aside::with_horizon(horizon);
        accounting
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Say what kind of sync the run is (and how it ended).
    pub(crate) fn note_sync(&self, note: String) {
        *self
            .sync_note
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(note);
    }

    /// The connector turned out not to sync (it keeps no state): nothing
    /// about a sync to say.
    pub(crate) fn forget_sync(&self) {
        *self
            .sync_note
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    pub(crate) fn sync_note(&self) -> Option<String> {
        self.sync_note
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A document was published: it is pending, at the next position.
    pub(crate) fn published(&self, id: &str) {
        let mut counts = self.lock();
        let position = counts.next;
        counts.next += 1;
        counts.hold(id, position);
        if let Some(positions) = self.positions.get() {
            positions.published(position);
        }
    }

    /// A deletion marker was published (or held to be): [`Self::published`],
    /// and its FINISH is counted in `deleted`.
    pub(crate) fn published_marker(&self, id: &str) {
        let mut counts = self.lock();
        let position = counts.next;
        counts.next += 1;
        counts.hold(id, position);
        counts.marker(id, position);
        if let Some(positions) = self.positions.get() {
            positions.published(position);
        }
    }

    /// A held deletion marker of `id` (its newest version) will never be
    /// sent, its run stopping: no longer waited for, while its position
    /// still holds back every state change made after it.
    pub(crate) fn abandoned(&self, id: &str) {
        let mut counts = self.lock();
        if let Some(held) = counts.pending.get_mut(id)
            && held.rest.pop_back().is_none()
        {
            counts.pending.remove(id);
        }
    }

    /// Take up what an earlier runner of the run left of this connector:
    /// its documents published (pending, in order) and the events about
    /// them.
    pub(crate) fn resume(&self, resumed: &crate::messenger::Resumed) {
        for id in &resumed.published {
            self.published(id);
        }
        self.published
            .fetch_add(resumed.published.len() as u64, Ordering::Relaxed);
        self.apply_all(&resumed.events);
    }

    /// A publish did not go through after all.
    pub(crate) fn unpublished(&self, id: &str) {
        let mut counts = self.lock();
        let position = counts
            .pending
            .get(id)
            .map(|held| held.rest.back().copied().unwrap_or(held.first));
        if counts.release(id, true)
            && let (Some(positions), Some(position)) = (self.positions.get(), position)
        {
            positions.ended(position, Some("the pipeline did not take the document"));
        }
    }

    /// How many documents were published (refused ones apart): the position
    /// a state change made now waits for.
    pub(crate) fn position(&self) -> u64 {
        self.lock().next
    }

    /// Every document published before this position is done, children
    /// included: state changes made before it may be committed.
    pub(crate) fn watermark(&self) -> u64 {
        self.lock().watermark()
    }

    /// The pipeline refused a document as it was published: it failed.
    pub(crate) fn refused(&self) {
        self.published.fetch_add(1, Ordering::Relaxed);
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Count an event.
    pub(crate) fn apply(&self, event: &Event) {
        self.apply_all(std::slice::from_ref(event));
    }

    /// Count events, in order, under one lock (their trace lines written
    /// after it).
    pub(crate) fn apply_all(&self, events: &[Event]) {
        let mut counts = self.lock();
        for event in events {
            self.apply_locked(&mut counts, event);
        }
        if let Some((trace, _)) = self.trace.get() {
            let lines = std::mem::take(&mut counts.traced);
            drop(counts);
            trace.write(&lines);
            let mut counts = self.lock();
            if counts.traced.is_empty() {
                // The buffer's room, for the next batch.
                counts.traced = lines;
                counts.traced.clear();
            }
        }
    }

    fn apply_locked(&self, counts: &mut Counts, event: &Event) {
        // Entries set aside a horizon ago are settled as the run ends
        // would settle them: duplicates.
        let mut early = 0u64;
        let waited = counts.aside.tick(&mut |kind| early += self.uncount(kind));
        counts.duplicates += early + waited;
        if event.run_id.as_deref() != Some(self.run_id.as_str()) {
            if counts.foreign == 0 {
                tracing::warn!(
                    run_id = ?event.run_id,
                    doc_id = %crate::core::text::for_log(&event.document_id),
                    "an event of another run was set aside"
                );
            }
            counts.foreign += 1;
            return;
        }
        if event.kind.is_terminal()
            && let Some(attempt) = event.attempt
            && event.after_creates > counts.aside.creates_seen(attempt)
        {
            counts.aside.wait(attempt, event.clone());
            return;
        }
        self.count(counts, event);
        if event.kind == EventKind::Create
            && let Some(attempt) = event.attempt
        {
            let seen = counts.aside.created(attempt);
            for event in &counts.aside.ready(attempt, seen) {
                self.count(counts, event);
            }
        }
    }

    /// A terminal event counted as it came turned out a duplicate: taken
    /// back out of its count (1, or 0 for a kind that is not terminal).
    fn uncount(&self, kind: EventKind) -> u64 {
        let counter = match kind {
            EventKind::Finish => &self.succeeded,
            EventKind::Fail => &self.failed,
            EventKind::Drop => &self.dropped,
            EventKind::Create => return 0,
        };
        counter.fetch_sub(1, Ordering::Relaxed);
        1
    }

    fn count(&self, counts: &mut Counts, event: &Event) {
        let counter = match event.kind {
            EventKind::Create => &self.created,
            EventKind::Finish => &self.succeeded,
            EventKind::Fail => &self.failed,
            EventKind::Drop => &self.dropped,
        };
        let id = event.document_id.as_str();
        // A full sync's sweep done is not a document indexed (one that
        // fails is counted: the run says it).
        if !(event.kind == EventKind::Finish && crate::core::sync::is_sweep_id(id)) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        let family = self.family.get();
        if let (Some(family), Some(root)) = (family, &event.root)
            && counts.pending.contains_key(root.as_str())
        {
            family.created(root, id);
        }
        if !event.kind.is_terminal()
            && let Some((trace, connector)) = self.trace.get()
        {
            trace.line(&mut counts.traced, connector, event, false);
        }
        if event.kind.is_terminal() {
            let deleted = counts.take_marker(id) && event.kind == EventKind::Finish;
            if deleted {
                self.deleted.fetch_add(1, Ordering::Relaxed);
            }
            if let Some((trace, connector)) = self.trace.get() {
                trace.line(&mut counts.traced, connector, event, deleted);
            }
            let position = counts.pending.get(id).map(|held| held.first);
            if let (Some(positions), Some(position)) = (self.positions.get(), position) {
                let failed = (event.kind == EventKind::Fail)
                    .then(|| event.message.as_deref().unwrap_or("the document failed"));
                positions.ended(position, failed);
            }
            if !counts.release(id, false) {
                counts.aside.set_early(id, event.kind);
            } else if let (Some(family), Some(position)) = (family, position) {
                // Deletion markers for its stale children hold back what it did.
                let pending = counts.pending.contains_key(id);
                let next = counts.next;
                for marker in family.ended(id, event.kind, position, pending, next, &self.deleted) {
                    counts.hold(&marker, position);
                    if let Some(positions) = self.positions.get() {
                        positions.held(position);
                    }
                }
            }
        } else if counts.aside.take_early(id) {
            // A child whose terminal event came first: done already.
        } else {
            // A child: it holds back what its root does (the root's oldest
            // pending version is the one being processed: one id's versions
            // go through in order), so the message the root came from is
            // not done before it; a child of a root not known to be pending
            // holds back what the least pending document does, or what the
            // last published did.
            let position = event
                .root
                .as_deref()
                .and_then(|root| counts.pending.get(root))
                .map(|held| held.first)
                .or_else(|| counts.live.keys().next().copied())
                .unwrap_or(counts.next.saturating_sub(1));
            counts.hold(id, position);
            if let Some(positions) = self.positions.get() {
                positions.held(position);
            }
        }
    }

    /// Documents not yet in a terminal state.
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Up to `n` pending ids, in order.
    pub(crate) fn pending_ids(&self, n: usize) -> (Vec<String>, usize) {
        let counts = self.lock();
        let mut ids: Vec<&String> = counts.pending.keys().collect();
        ids.sort_unstable();
        let all = ids.len();
        (ids.into_iter().take(n).cloned().collect(), all)
    }

    /// The connector is over: terminal events that matched no pending
    /// document are duplicates, taken out of the outcome counts.
    pub(crate) fn settle(&self) -> Settled {
        let mut counts = self.lock();
        let mut early = 0u64;
        // Waiting for CREATEs that never came: a pass whose events were lost
        // before a redelivery did it again.
        let waited = counts.aside.drain(&mut |kind| early += self.uncount(kind));
        let duplicates = early + waited + std::mem::take(&mut counts.duplicates);
        Settled {
            duplicates,
            foreign: counts.foreign,
        }
    }

    /// Terminal events settled as duplicates so far, and what the side
    /// tables hold: a continuous run's report, and tests of its bounds.
    pub(crate) fn holding(&self) -> Holding {
        let counts = self.lock();
        Holding {
            pending: counts.pending.len(),
            positions: counts.live.len(),
            markers: counts.markers.len(),
            aside: counts.aside.sizes(),
            duplicates: counts.duplicates,
            foreign: counts.foreign,
        }
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// How many more publications of each id to skip: those an earlier runner
/// of a resumed run made.
#[derive(Debug, Default)]
pub(crate) struct Skip(Mutex<foldhash::HashMap<String, u32>>);

impl Skip {
    pub(crate) fn new(ids: &[String]) -> Self {
        let mut counts = foldhash::HashMap::default();
        for id in ids {
            *counts.entry(id.clone()).or_default() += 1;
        }
        Self(Mutex::new(counts))
    }

    /// Whether this publication of `id` was made already (counted off).
    pub(crate) fn take(&self, id: &str) -> bool {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match counts.get_mut(id) {
            Some(1) => {
                counts.remove(id);
                true
            }
            Some(n) => {
                *n -= 1;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod bounds_tests;
#[cfg(test)]
mod tests;
