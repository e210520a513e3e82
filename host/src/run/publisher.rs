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
/// a terminal event (FINISH, FAIL, DROP). Counts are kept per id and may go
/// below zero for a moment: a child's FINISH can be seen before its CREATE.
/// The connector is complete when no id has a non-zero count.
#[derive(Debug, Default)]
pub(crate) struct Accounting {
    /// Randomly seeded: document ids come from sources, so no hash flooding.
    pending: Mutex<foldhash::HashMap<String, i64>>,
    pub(crate) published: AtomicU64,
    pub(crate) created: AtomicU64,
    pub(crate) succeeded: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

impl Accounting {
    fn adjust(&self, id: &str, delta: i64) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.get_mut(id) {
            Some(count) => {
                *count += delta;
                if *count == 0 {
                    pending.remove(id);
                }
            }
            None => {
                pending.insert(id.to_owned(), delta);
            }
        }
    }

    /// Count an event.
    pub(crate) fn apply(&self, event: &Event) {
        let (counter, delta) = match event.kind {
            EventKind::Create => (&self.created, 1),
            EventKind::Finish => (&self.succeeded, -1),
            EventKind::Fail => (&self.failed, -1),
            EventKind::Drop => (&self.dropped, -1),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.adjust(&event.document_id, delta);
    }

    /// Documents not yet in a terminal state.
    pub(crate) fn pending(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
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
    fn publish(&mut self, doc: Document) -> Result<(), String> {
        let id = doc.id().to_owned();
        // Pending before sending: a fast FINISH must never precede it.
        self.accounting.adjust(&id, 1);
        let mut doc = doc;
        loop {
            if let Some(reason) = self.abort.reason() {
                self.accounting.adjust(&id, -1);
                return Err(format!("the run is stopping: {reason}"));
            }
            match self.messenger.send_for_processing(doc, PUBLISH_WAIT) {
                Ok(None) => break,
                Ok(Some(back)) => doc = back,
                Err(e) => {
                    self.accounting.adjust(&id, -1);
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
        a.adjust("parent", 1);
        a.apply(&event("child", EventKind::Finish));
        assert_eq!(a.pending(), 2, "the child's FINISH came first");
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
        a.adjust("d", 1);
        a.adjust("d", 1);
        a.apply(&event("d", EventKind::Finish));
        assert_eq!(a.pending(), 1);
        a.apply(&event("d", EventKind::Fail));
        assert_eq!(a.pending(), 0);
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
