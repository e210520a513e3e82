//! The sink through which a connector publishes: each document counted as
//! pending in its [`Accounting`] before it is sent, paused, throttled and
//! stamped with its sync, and a syncing connector's deletion markers held by
//! its mass-delete guard (`guard.rs`) until its `execute` returns.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::time::{Duration, Instant};

use super::StopReason;
use super::accounting::{Accounting, Skip};
use super::guard::{Guard, Hold};
use super::stop::Abort;

use crate::core::document::Document;
use crate::messenger::{MessengerError, PublisherMessenger};
use crate::plugin::PublishSink;
use crate::telemetry::RunStats;
use crate::telemetry::events::{DocumentFailed, FailedIn};

/// How long a blocked publish waits before checking whether the run aborted.
const PUBLISH_WAIT: Duration = Duration::from_millis(50);

/// What a connector's `publisher` handle writes to.
pub(crate) struct Publish {
    pub(crate) messenger: Arc<dyn PublisherMessenger>,
    pub(crate) accounting: Arc<Accounting>,
    pub(crate) stats: Arc<RunStats>,
    pub(crate) abort: Abort,
    pub(crate) interrupt: super::Interrupt,
    pub(crate) pause: super::Pause,
    pub(crate) published: metrics::Counter,
    pub(crate) scope: crate::telemetry::meters::Scope,
    /// The run's (or its tenant's) ceiling on documents per second.
    pub(crate) throttle: Option<Arc<super::Throttle>>,
    /// Publications an earlier runner of the run made (a resumed run): not
    /// made again.
    pub(crate) skip: Option<Arc<Skip>>,
    /// A syncing connector's sync: every document is stamped with it.
    pub(crate) sync: Option<Arc<super::sync::SyncRun>>,
    /// A syncing connector's mass-delete guard, holding its deletion
    /// markers until its `execute` returns.
    pub(crate) guard: Option<Arc<super::guard::Guard>>,
}

impl PublishSink for Publish {
    fn publish(&mut self, doc: Document, deadline: std::time::Instant) -> Result<(), String> {
        if self.skip.as_ref().is_some_and(|skip| skip.take(doc.id())) {
            // In Kafka already, and counted: the earlier runner sent it.
            return Ok(());
        }
        match self.guard.clone() {
            Some(guard) => self.guarded(&guard, doc, deadline),
            None => self.send(doc, deadline, false),
        }
    }

    fn expect(&mut self, documents: u64) {
        self.stats.expect(documents);
    }
}

impl Publish {
    /// Send `doc`. With `held`, a deletion marker the guard held, whose
    /// place was taken when it was made: when it cannot be sent it stays
    /// pending, so no state change made after it is committed.
    pub(super) fn send(
        &mut self,
        doc: Document,
        deadline: std::time::Instant,
        held: bool,
    ) -> Result<(), String> {
        if self.pause.is_paused() {
            // The connector waits in its call, as for room in the pipeline.
            let stop = || {
                self.abort.is_set()
                    || self.interrupt.is_set()
                    || std::time::Instant::now() >= deadline
            };
            if !self.pause.wait(stop) && std::time::Instant::now() >= deadline {
                return Err(
                    "the connector's execute deadline passed while the run was paused".into(),
                );
            }
        }
        if let Some(throttle) = &self.throttle {
            let stop = || {
                self.abort.is_set()
                    || self.interrupt.is_set()
                    || std::time::Instant::now() >= deadline
            };
            if !throttle.take(stop) && std::time::Instant::now() >= deadline {
                return Err(
                    "the connector's execute deadline passed while waiting for its turn (max documents per second)"
                        .into(),
                );
            }
        }
        let id = doc.id().to_owned();
        let sweep = crate::core::sync::is_sweep(&doc);
        let mut doc = doc;
        if let Some(sync) = &self.sync {
            sync.stamp(&mut doc);
        }
        // Pending before sending: a fast FINISH must never precede it.
        if held {
        } else if doc.is_deleted() {
            self.accounting.published_marker(&id);
        } else {
            self.accounting.published(&id);
        }
        let undo = |accounting: &Accounting| {
            if !held {
                accounting.unpublished(&id);
            }
        };
        // The first try waits for nothing (and reads no clock); later ones
        // wait for room, up to the deadline.
        let mut wait = Duration::ZERO;
        loop {
            if let Some(reason) = self.abort.reason() {
                undo(&self.accounting);
                return Err(format!("the run is stopping: {reason}"));
            }
            if self.interrupt.is_set() {
                undo(&self.accounting);
                return Err("the run was interrupted".into());
            }
            match self.messenger.send_for_processing(doc, wait) {
                Ok(None) => break,
                Ok(Some(back)) => doc = back,
                Err(MessengerError::Refused(reason)) => {
                    // The document fails alone; the connector goes on.
                    self.accounting.unpublished(&id);
                    self.accounting.refused();
                    DocumentFailed {
                        scope: &self.scope,
                        stats: &self.stats,
                        place: FailedIn::Publisher,
                        plugin: "weir",
                        doc_id: &id,
                        run_id: None,
                        message: &reason,
                    }
                    .emit();
                    return Ok(());
                }
                Err(e) => {
                    undo(&self.accounting);
                    return Err(e.to_string());
                }
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                undo(&self.accounting);
                return Err(
                    "the connector's execute deadline passed while waiting for room in the pipeline"
                        .into(),
                );
            }
            wait = PUBLISH_WAIT.min(left);
        }
        if !sweep {
            // A full sync's sweep is not a document the connector sent.
            self.accounting.published.fetch_add(1, Ordering::Relaxed);
            RunStats::add(&self.stats.published, 1);
            self.published.increment(1);
        }
        Ok(())
    }
}

impl Publish {
    /// Publish through the guard: a deletion marker is held (or the run
    /// refused); another document is sent after the markers of its id.
    pub(super) fn guarded(
        &mut self,
        guard: &Guard,
        doc: Document,
        deadline: Instant,
    ) -> Result<(), String> {
        if !doc.is_deleted() {
            self.send_held(guard.take_id(doc.id()), deadline)?;
            return self.send(doc, deadline, false);
        }
        let id = doc.id().to_owned();
        let accounting = Arc::clone(&self.accounting);
        match guard.hold(doc, || accounting.published_marker(&id)) {
            Hold::Held => Ok(()),
            Hold::Send(earlier, doc) => {
                self.send_held(earlier, deadline)?;
                self.send(doc, deadline, false)
            }
            Hold::Refused(refusal, dropped) => {
                self.abandon(dropped);
                let message = refusal.to_string();
                if !self.abort.is_set() {
                    tracing::warn!(
                        deletes = refusal.deletes,
                        limit = refusal.limit,
                        keys = refusal.keys,
                        share = refusal.share,
                        "the mass-delete guard stops the run: nothing it held is sent"
                    );
                }
                self.abort.trigger(StopReason::MassDelete(refusal));
                Err(message)
            }
        }
    }

    /// `execute` returned `executed`: when it succeeded, send the markers
    /// the guard holds, in order; else they are never sent.
    pub(super) fn after_execute(
        &mut self,
        executed: Result<(), String>,
        timeout: Duration,
    ) -> Result<(), String> {
        let Some(guard) = self.guard.clone() else {
            return executed;
        };
        let markers = guard.take_all();
        if let Err(e) = executed {
            if !markers.is_empty() {
                tracing::info!(
                    deletes = markers.len(),
                    "the connector's deletion markers are not sent: its execute did not complete (their state changes are not kept)"
                );
            }
            self.abandon(markers);
            return Err(e);
        }
        if !markers.is_empty() {
            tracing::info!(
                deletes = markers.len(),
                limit = guard.limit(),
                "the connector's deletion markers are within the mass-delete guard's limit: sent"
            );
        }
        self.send_held(markers, Instant::now() + timeout)
    }

    /// Send `markers` the guard held, in order. One that cannot be sent is
    /// abandoned with those after it: never sent, they still hold back
    /// every state change made after them.
    fn send_held(&mut self, markers: Vec<Document>, deadline: Instant) -> Result<(), String> {
        let mut markers = markers.into_iter();
        while let Some(marker) = markers.next() {
            let id = marker.id().to_owned();
            if let Err(e) = self.send(marker, deadline, true) {
                self.accounting.abandoned(&id);
                self.abandon(markers.collect());
                return Err(e);
            }
        }
        Ok(())
    }

    /// Held `markers` that will never be sent: no longer waited for.
    fn abandon(&self, markers: Vec<Document>) {
        for marker in &markers {
            self.accounting.abandoned(marker.id());
        }
    }
}
