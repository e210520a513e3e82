//! What the accounting sets aside beside its pending documents: terminal
//! events for ids that were not pending (`early`), the CREATEs seen per
//! worker pass (`creates`), and terminal events waiting for more of their
//! pass's CREATEs (`waiting`).
//!
//! A run that ends settles them ([`Aside::drain`]). A run that never ends
//! (a continuous run) cannot wait for that: each entry is settled the same
//! way once [`Aside::horizon`] more events have been applied without it
//! being touched. The events that resolve an entry (a child's CREATE and
//! its terminal event, a pass's CREATEs and its documents' terminal events)
//! are made moments apart by one worker and its indexer, so an entry left
//! that long is one nothing will resolve: a duplicate from at-least-once
//! redelivery, or the events of a pass a redelivery did again. What the
//! tables hold is then bounded by the horizon, never by the run's length.

use std::collections::VecDeque;

use crate::core::event::{Event, EventKind};

/// Events applied before an untouched entry is settled: far more than
/// the events of the documents in flight around it.
pub(super) const HORIZON: u64 = 1 << 18;

/// The side tables, with the order their entries were last touched in.
#[derive(Debug)]
pub(super) struct Aside {
    /// Events applied so far: the tables' clock.
    now: u64,
    horizon: u64,
    /// Per id: when last touched, and the terminal kinds set aside.
    early: foldhash::HashMap<String, (u64, Vec<EventKind>)>,
    early_order: VecDeque<(u64, String)>,
    /// Per worker pass: when last touched, and the CREATEs seen.
    creates: foldhash::HashMap<u64, (u64, u32)>,
    creates_order: VecDeque<(u64, u64)>,
    /// Per worker pass: when last touched, and its waiting events.
    waiting: foldhash::HashMap<u64, (u64, Vec<Event>)>,
    waiting_order: VecDeque<(u64, u64)>,
}

impl Default for Aside {
    fn default() -> Self {
        Self::with_horizon(HORIZON)
    }
}

/// How many entries the side tables hold (for tests and the report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AsideSizes {
    pub(crate) early: usize,
    pub(crate) creates: usize,
    pub(crate) waiting: usize,
    /// Entries of the three orders (touches within the horizon).
    pub(crate) order: usize,
}

impl Aside {
    pub(super) fn with_horizon(horizon: u64) -> Self {
        Self {
            now: 0,
            horizon: horizon.max(1),
            early: Default::default(),
            early_order: VecDeque::new(),
            creates: Default::default(),
            creates_order: VecDeque::new(),
            waiting: Default::default(),
            waiting_order: VecDeque::new(),
        }
    }

    /// One more event is being applied: settle what has been left a
    /// horizon long, telling `settled` each terminal kind of `early` (a
    /// duplicate, counted already) and returning how many waiting events
    /// were dropped (duplicates never counted).
    pub(super) fn tick(&mut self, settled: &mut impl FnMut(EventKind)) -> u64 {
        self.now += 1;
        let Some(before) = self.now.checked_sub(self.horizon) else {
            return 0;
        };
        while let Some(&(at, _)) = self.early_order.front() {
            if at > before {
                break;
            }
            let (_, id) = self.early_order.pop_front().expect("a front");
            if self.early.get(&id).is_some_and(|(last, _)| *last == at)
                && let Some((_, kinds)) = self.early.remove(&id)
            {
                kinds.into_iter().for_each(&mut *settled);
            }
        }
        while let Some(&(at, attempt)) = self.creates_order.front() {
            if at > before {
                break;
            }
            self.creates_order.pop_front();
            if self
                .creates
                .get(&attempt)
                .is_some_and(|(last, _)| *last == at)
            {
                self.creates.remove(&attempt);
            }
        }
        let mut dropped = 0u64;
        while let Some(&(at, attempt)) = self.waiting_order.front() {
            if at > before {
                break;
            }
            self.waiting_order.pop_front();
            if self
                .waiting
                .get(&attempt)
                .is_some_and(|(last, _)| *last == at)
                && let Some((_, events)) = self.waiting.remove(&attempt)
            {
                dropped += events.len() as u64;
            }
        }
        dropped
    }

    /// A terminal event for `id`, which was not pending.
    pub(super) fn set_early(&mut self, id: &str, kind: EventKind) {
        let now = self.now;
        match self.early.get_mut(id) {
            Some((last, kinds)) => {
                *last = now;
                kinds.push(kind);
            }
            None => {
                self.early.insert(id.to_owned(), (now, vec![kind]));
            }
        }
        self.early_order.push_back((now, id.to_owned()));
    }

    /// A CREATE for `id`: whether a terminal event set aside for it was
    /// there (then taken: the child is done already).
    pub(super) fn take_early(&mut self, id: &str) -> bool {
        let Some((_, kinds)) = self.early.get_mut(id) else {
            return false;
        };
        kinds.remove(0);
        if kinds.is_empty() {
            self.early.remove(id);
        }
        true
    }

    /// The CREATEs of pass `attempt` seen so far.
    pub(super) fn creates_seen(&mut self, attempt: u64) -> u32 {
        let now = self.now;
        match self.creates.get_mut(&attempt) {
            Some((last, seen)) => {
                if *last != now {
                    *last = now;
                    self.creates_order.push_back((now, attempt));
                }
                *seen
            }
            None => 0,
        }
    }

    /// One more CREATE of pass `attempt`: how many now.
    pub(super) fn created(&mut self, attempt: u64) -> u32 {
        let now = self.now;
        let (last, seen) = self.creates.entry(attempt).or_insert((now, 0));
        *last = now;
        *seen += 1;
        let seen = *seen;
        self.creates_order.push_back((now, attempt));
        seen
    }

    /// `event` must wait for more CREATEs of pass `attempt`.
    pub(super) fn wait(&mut self, attempt: u64, event: Event) {
        let now = self.now;
        let (last, events) = self.waiting.entry(attempt).or_insert((now, Vec::new()));
        *last = now;
        events.push(event);
        self.waiting_order.push_back((now, attempt));
    }

    /// The events of pass `attempt` that `seen` CREATEs let through.
    pub(super) fn ready(&mut self, attempt: u64, seen: u32) -> Vec<Event> {
        let Some((last, waiting)) = self.waiting.remove(&attempt) else {
            return Vec::new();
        };
        let (ready, still): (Vec<Event>, Vec<Event>) =
            waiting.into_iter().partition(|e| e.after_creates <= seen);
        if !still.is_empty() {
            self.waiting.insert(attempt, (last, still));
        }
        ready
    }

    /// The run is over: every early terminal kind (told to `settled`), and
    /// how many events were still waiting; the tables are emptied (a
    /// runner that goes on, `weir run --every`, starts afresh).
    pub(super) fn drain(&mut self, settled: &mut impl FnMut(EventKind)) -> u64 {
        for (_, kinds) in std::mem::take(&mut self.early).into_values() {
            kinds.into_iter().for_each(&mut *settled);
        }
        let waiting = std::mem::take(&mut self.waiting)
            .values()
            .map(|(_, w)| w.len() as u64)
            .sum();
        self.creates.clear();
        self.early_order.clear();
        self.creates_order.clear();
        self.waiting_order.clear();
        waiting
    }

    pub(super) fn sizes(&self) -> AsideSizes {
        AsideSizes {
            early: self.early.len(),
            creates: self.creates.len(),
            waiting: self.waiting.len(),
            order: self.early_order.len() + self.creates_order.len() + self.waiting_order.len(),
        }
    }
}
