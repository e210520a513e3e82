//! Publisher accounting: which documents of a connector are still pending,
//! and the sink through which a connector publishes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::document::Document;
use crate::event::{Event, EventKind};
use crate::messenger::PublisherMessenger;
use crate::plugin::PublishSink;
use crate::telemetry::{self, RunStats};

/// How long a blocked publish waits before checking whether the run aborted.
const PUBLISH_WAIT: Duration = Duration::from_millis(50);

/// The first reason a run must stop, shared by every thread of a connector.
#[derive(Debug, Clone, Default)]
pub(crate) struct Abort(Arc<OnceLock<String>>);

impl Abort {
    /// Record `reason` unless a reason is already recorded.
    pub(crate) fn trigger(&self, reason: impl Into<String>) {
        let _ = self.0.set(reason.into());
    }

    pub(crate) fn reason(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.get().is_some()
    }
}

/// Pending documents and outcome counts for one connector.
///
/// A document is pending from its publish (or its CREATE, for a child) until
/// a terminal event (FINISH, FAIL, DROP). The connector is complete when
/// nothing is pending.
///
/// A terminal event for an id that is not pending is kept aside: it is either
/// a child's FINISH seen before its CREATE (the CREATE then finds it), or a
/// duplicate from at-least-once redelivery (it then stays aside and never
/// holds up completion).
#[derive(Debug, Default)]
pub(crate) struct Accounting {
    counts: Mutex<Counts>,
    pub(crate) published: AtomicU64,
    pub(crate) created: AtomicU64,
    pub(crate) succeeded: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

/// Randomly seeded maps: document ids come from sources, so no hash flooding.
#[derive(Debug, Default)]
struct Counts {
    pending: foldhash::HashMap<String, u32>,
    early: foldhash::HashMap<String, u32>,
}

fn decrement(map: &mut foldhash::HashMap<String, u32>, id: &str) -> bool {
    match map.get_mut(id) {
        Some(count) => {
            *count -= 1;
            if *count == 0 {
                map.remove(id);
            }
            true
        }
        None => false,
    }
}

fn increment(map: &mut foldhash::HashMap<String, u32>, id: &str) {
    match map.get_mut(id) {
        Some(count) => *count += 1,
        None => {
            map.insert(id.to_owned(), 1);
        }
    }
}

impl Accounting {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A document was published: it is pending.
    pub(crate) fn published(&self, id: &str) {
        increment(&mut self.lock().pending, id);
    }

    /// A publish did not go through after all.
    pub(crate) fn unpublished(&self, id: &str) {
        decrement(&mut self.lock().pending, id);
    }

    /// Count an event.
    pub(crate) fn apply(&self, event: &Event) {
        let counter = match event.kind {
            EventKind::Create => &self.created,
            EventKind::Finish => &self.succeeded,
            EventKind::Fail => &self.failed,
            EventKind::Drop => &self.dropped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let id = event.document_id.as_str();
        let mut counts = self.lock();
        let Counts { pending, early } = &mut *counts;
        if event.kind.is_terminal() {
            if !decrement(pending, id) {
                increment(early, id);
            }
        } else if !decrement(early, id) {
            increment(pending, id);
        }
    }

    /// Documents not yet in a terminal state.
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// What a connector's `publisher` handle writes to.
pub(crate) struct Publish {
    pub(crate) messenger: Arc<dyn PublisherMessenger>,
    pub(crate) accounting: Arc<Accounting>,
    pub(crate) stats: Arc<RunStats>,
    pub(crate) abort: Abort,
    pub(crate) published: metrics::Counter,
}

impl PublishSink for Publish {
    fn publish(&mut self, doc: Document, deadline: std::time::Instant) -> Result<(), String> {
        let id = doc.id().to_owned();
        // Pending before sending: a fast FINISH must never precede it.
        self.accounting.published(&id);
        let mut doc = doc;
        loop {
            if let Some(reason) = self.abort.reason() {
                self.accounting.unpublished(&id);
                return Err(format!("the run is stopping: {reason}"));
            }
            if std::time::Instant::now() >= deadline {
                self.accounting.unpublished(&id);
                return Err(
                    "the connector's execute deadline passed while waiting for room in the pipeline"
                        .into(),
                );
            }
            match self.messenger.send_for_processing(doc, PUBLISH_WAIT) {
                Ok(None) => break,
                Ok(Some(back)) => doc = back,
                Err(e) => {
                    self.accounting.unpublished(&id);
                    return Err(e.to_string());
                }
            }
        }
        self.accounting.published.fetch_add(1, Ordering::Relaxed);
        RunStats::add(&self.stats.published, 1);
        self.published.increment(1);
        Ok(())
    }
}

/// Label-free handle for the published counter of `connector`.
pub(crate) fn published_counter(connector: &str) -> metrics::Counter {
    metrics::counter!(telemetry::DOCS_PUBLISHED, "connector" => connector.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, kind: EventKind) -> Event {
        Event {
            document_id: id.into(),
            run_id: None,
            kind,
            message: None,
        }
    }

    #[test]
    fn terminal_events_before_their_create_are_handled() {
        let a = Accounting::default();
        a.published("parent");
        a.apply(&event("child", EventKind::Finish));
        assert_eq!(
            a.pending(),
            1,
            "the child's FINISH came first and waits aside"
        );
        a.apply(&event("child", EventKind::Create));
        assert_eq!(a.pending(), 1);
        a.apply(&event("parent", EventKind::Drop));
        assert_eq!(a.pending(), 0);
        assert_eq!(Accounting::get(&a.created), 1);
        assert_eq!(Accounting::get(&a.succeeded), 1);
        assert_eq!(Accounting::get(&a.dropped), 1);
    }

    #[test]
    fn the_same_id_published_twice_needs_two_terminal_events() {
        let a = Accounting::default();
        a.published("d");
        a.published("d");
        a.apply(&event("d", EventKind::Finish));
        assert_eq!(a.pending(), 1);
        a.apply(&event("d", EventKind::Fail));
        assert_eq!(a.pending(), 0);
    }

    #[test]
    fn duplicate_terminal_events_never_hold_up_completion() {
        let a = Accounting::default();
        a.published("d");
        a.apply(&event("d", EventKind::Finish));
        a.apply(&event("d", EventKind::Finish));
        assert_eq!(a.pending(), 0, "a redelivered document's second FINISH");
        a.published("e");
        assert_eq!(
            a.pending(),
            1,
            "a duplicate is not taken for another id's or publish's event"
        );
    }

    #[test]
    fn abort_keeps_the_first_reason() {
        let abort = Abort::default();
        assert!(!abort.is_set());
        abort.trigger("first");
        abort.trigger("second");
        assert_eq!(abort.reason(), Some("first"));
    }
}
