//! A streaming connector's deliveries (`wit/messages.wit`): the sources its
//! config grants, opened for its run, and for each message in flight the
//! documents it made (their publish positions, from the accounting's
//! [`Positions`]). A message finished whose documents are all done (indexed,
//! dropped, or failed and dead-lettered) is settled with its source:
//! [`Settled::Done`], or [`Settled::Failed`] with the first failure's error.
//! A rejected message is dead-lettered at once with its origin and settled
//! [`Settled::Invalid`]; the rest are abandoned when the run stops (the
//! sources' `close`), to be delivered again.
//!
//! Only messages in flight are held: memory stays bounded however long the
//! run goes on ([`MAX_IN_FLIGHT`] at most).
//!
//! A stage's child is held at the least position pending when it was made
//! (`accounting.rs`): it counts against the message that owns that position,
//! its parent's or an earlier one, never a later one.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use super::accounting::{Accounting, Positions};
use super::dead_letters::DeadLetterFile;
use crate::core::document::Document;
use crate::core::failure::Failure;
use crate::core::messages::{Delivery, ReceiveError, Settled, Source};
use crate::plugin::MessageSession;

/// Most messages in flight (received, not yet settled) at once: past it
/// `receive` waits and answers none, until some are settled.
pub(crate) const MAX_IN_FLIGHT: usize = 100_000;

/// The longest one `receive` waits on a source, whatever the connector
/// asked (it asks again).
const RECEIVE_WAIT: Duration = Duration::from_secs(1);

/// A streaming connector's deadline: none, in practice (a century; an
/// `Instant` that far ahead is still one).
pub(crate) const NO_DEADLINE: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// What tells the deliveries the run is stopping.
type Stopping = Box<dyn Fn() -> bool + Send + Sync>;

/// One connector run's sources and messages in flight.
pub(crate) struct Deliveries {
    pipeline: String,
    connector: String,
    run_id: String,
    /// By the name the plugin uses for each.
    sources: Vec<(String, Arc<dyn Source>)>,
    /// Weak: the accounting holds these deliveries (its `Positions`), and
    /// the sources' clients go when it does.
    accounting: Weak<Accounting>,
    dead_letters: Option<Arc<DeadLetterFile>>,
    stopping: OnceLock<Stopping>,
    /// The run's pauses, passed on to the sources while the run is on.
    pauses: Mutex<Option<super::stop::Listening>>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.sources.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Deliveries")
            .field("connector", &self.connector)
            .field("sources", &names)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Inner {
    next_handle: u64,
    flight: foldhash::HashMap<u64, InFlight>,
    /// The positions of documents of messages in flight: whose, and how
    /// many documents are pending there.
    positions: foldhash::HashMap<u64, (u64, u32)>,
    /// The message whose document the connector is publishing now.
    publishing: Option<u64>,
    closed: bool,
}

struct InFlight {
    source: usize,
    token: u64,
    /// Where it came from, and which delivery it is: for its dead letter.
    origin: String,
    attempt: u32,
    /// Its documents not yet done.
    outstanding: u32,
    finished: bool,
    /// The first of its documents' failures.
    error: Option<String>,
    /// A publish of it was cut by the run stopping: never settled but
    /// abandoned.
    lost: bool,
}

/// A settlement to hand a source, outside the lock.
type Due = (Arc<dyn Source>, u64, Settled);

impl Deliveries {
    pub(crate) fn new(
        pipeline: &str,
        connector: &str,
        run_id: &str,
        sources: Vec<(String, Arc<dyn Source>)>,
        accounting: &Arc<Accounting>,
        dead_letters: Option<Arc<DeadLetterFile>>,
    ) -> Self {
        Self {
            pipeline: pipeline.to_owned(),
            connector: connector.to_owned(),
            run_id: run_id.to_owned(),
            sources,
            accounting: Arc::downgrade(accounting),
            dead_letters,
            stopping: OnceLock::new(),
            pauses: Mutex::new(None),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// `stopping` says when the run stops: `receive` answers
    /// [`ReceiveError::Stopping`] from then on.
    pub(crate) fn stop_when(&self, stopping: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.stopping.set(Box::new(stopping));
    }

    /// Pause and resume every source with `pause`, the run's (at once
    /// when it is paused now), until the deliveries close: a paused source
    /// takes nothing (a queue's consumers are closed, a topic's partitions
    /// paused) however long the connector waits.
    pub(crate) fn follow(&self, pause: &super::Pause) {
        let sources: Vec<Arc<dyn Source>> =
            self.sources.iter().map(|(_, s)| Arc::clone(s)).collect();
        let listening = pause.listen(move |paused| {
            for source in &sources {
                if paused {
                    source.pause();
                } else {
                    source.resume();
                }
            }
        });
        *self.pauses.lock().unwrap_or_else(PoisonError::into_inner) = Some(listening);
    }

    fn is_stopping(&self) -> bool {
        self.stopping.get().is_some_and(|s| s())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Messages in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.lock().flight.len()
    }

    /// The run is over: every source closes, abandoning what was not
    /// settled (delivered again to the next run). Once.
    pub(crate) fn close(&self) {
        let abandoned = {
            let mut inner = self.lock();
            if std::mem::replace(&mut inner.closed, true) {
                return;
            }
            inner.positions.clear();
            std::mem::take(&mut inner.flight).len()
        };
        // No pause reaches a closed source.
        drop(
            self.pauses
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if abandoned > 0 {
            tracing::info!(
                connector = %self.connector,
                abandoned,
                "messages not done are left to their sources, delivered again to the next run"
            );
        }
        for (_, source) in &self.sources {
            source.close();
        }
    }

    /// `handle`'s settlement, when it is finished and its documents done.
    fn due(&self, inner: &mut Inner, handle: u64) -> Option<Due> {
        let ready = inner
            .flight
            .get(&handle)
            .is_some_and(|f| f.finished && f.outstanding == 0 && !f.lost);
        if !ready {
            return None;
        }
        let flight = inner.flight.remove(&handle)?;
        let settled = match flight.error {
            None => Settled::Done,
            Some(error) => Settled::Failed { error },
        };
        Some((
            Arc::clone(&self.sources[flight.source].1),
            flight.token,
            settled,
        ))
    }

    fn settle(due: Option<Due>) {
        if let Some((source, token, settled)) = due {
            source.settle(token, settled);
        }
    }

    /// Dead-letter rejected `delivery` with its origin and `reason`.
    fn dead_letter(&self, origin: &str, attempt: u32, reason: &str) {
        tracing::warn!(
            connector = %self.connector,
            origin = %crate::core::text::for_log(origin),
            reason = %crate::core::text::for_log(reason),
            "the connector rejected a message: dead-lettered"
        );
        if let Some(accounting) = self.accounting.upgrade() {
            accounting.refused();
        }
        let Some(letters) = &self.dead_letters else {
            return;
        };
        let mut doc = Document::new(origin);
        doc.set_run_id(Some(self.run_id.clone()));
        let _ = doc.set("origin", serde_json::json!(origin));
        let _ = doc.set("attempt", serde_json::json!(attempt));
        let failure = Failure {
            plugin: self.connector.clone(),
            message: reason.to_owned(),
            attempts: attempt,
            reason: None,
        };
        if let Err(e) = letters.write(&self.pipeline, &doc, &failure) {
            tracing::error!(error = %e, "a rejected message could not be dead-lettered");
        }
    }
}

impl MessageSession for Deliveries {
    fn receive(
        &self,
        source: &str,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<(u64, Delivery)>, ReceiveError> {
        if self.is_stopping() || self.lock().closed {
            return Err(ReceiveError::Stopping);
        }
        let Some(index) = self.sources.iter().position(|(name, _)| name == source) else {
            let names: Vec<&str> = self.sources.iter().map(|(n, _)| n.as_str()).collect();
            return Err(ReceiveError::Failed(format!(
                "source `{source}` is not granted to the connector (its grants name: [{}])",
                names.join(", ")
            )));
        };
        // However long the connector asks to wait, a source is asked for at
        // most RECEIVE_WAIT at a time: a stop or a pause is never behind a
        // long wait (an empty answer is one the contract allows).
        let wait = wait.min(RECEIVE_WAIT);
        let room = MAX_IN_FLIGHT.saturating_sub(self.in_flight());
        if room == 0 {
            // The connector receives without finishing: wait as if none came.
            std::thread::sleep(wait);
            return Ok(Vec::new());
        }
        let deliveries = self.sources[index].1.receive(max.min(room), wait)?;
        let mut inner = self.lock();
        let mut out = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            inner.next_handle += 1;
            let handle = inner.next_handle;
            inner.flight.insert(
                handle,
                InFlight {
                    source: index,
                    token: delivery.token,
                    origin: delivery.origin.clone(),
                    attempt: delivery.attempt,
                    outstanding: 0,
                    finished: false,
                    error: None,
                    lost: false,
                },
            );
            out.push((handle, delivery));
        }
        Ok(out)
    }

    fn publish_for(
        &self,
        handle: u64,
        publish: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        {
            let mut inner = self.lock();
            match inner.flight.get(&handle) {
                Some(flight) if !flight.finished => inner.publishing = Some(handle),
                _ => {
                    return Err(format!(
                        "message {handle} is not in flight (unknown, finished or rejected)"
                    ));
                }
            }
        }
        let published = publish();
        let mut inner = self.lock();
        inner.publishing = None;
        if published.is_err()
            && self.is_stopping()
            && let Some(flight) = inner.flight.get_mut(&handle)
        {
            flight.lost = true;
        }
        published
    }

    fn finish(&self, handle: u64) -> bool {
        let (source, token, due) = {
            let mut inner = self.lock();
            let (source, token) = match inner.flight.get_mut(&handle) {
                Some(flight) if !flight.finished => {
                    flight.finished = true;
                    (flight.source, flight.token)
                }
                _ => return false,
            };
            (source, token, self.due(&mut inner, handle))
        };
        // Its documents are published: a pushed message is answered (out of
        // the lock: the answer may wait on a pipe).
        self.sources[source].1.finished(token);
        Self::settle(due);
        true
    }

    fn reject(&self, handle: u64, reason: &str) -> bool {
        let flight = {
            let mut inner = self.lock();
            let Some(flight) = inner.flight.remove(&handle) else {
                return false;
            };
            // Documents already published for it go on, counted for none.
            inner.positions.retain(|_, (owner, _)| *owner != handle);
            flight
        };
        let source = Arc::clone(&self.sources[flight.source].1);
        self.dead_letter(&flight.origin, flight.attempt, reason);
        source.settle(
            flight.token,
            Settled::Invalid {
                reason: reason.to_owned(),
            },
        );
        true
    }
}

impl Drop for Deliveries {
    /// A run that failed before it closed them (a connector that could not
    /// start) still closes its sources: a push source leaves its run's
    /// pushes, a queue returns what it holds.
    fn drop(&mut self) {
        self.close();
    }
}

impl Positions for Deliveries {
    fn published(&self, position: u64) {
        let mut inner = self.lock();
        if let Some(handle) = inner.publishing
            && let Some(flight) = inner.flight.get_mut(&handle)
        {
            flight.outstanding += 1;
            inner.positions.insert(position, (handle, 1));
        }
    }

    fn held(&self, position: u64) {
        let mut inner = self.lock();
        let Some((handle, count)) = inner.positions.get_mut(&position) else {
            return;
        };
        *count += 1;
        let handle = *handle;
        if let Some(flight) = inner.flight.get_mut(&handle) {
            flight.outstanding += 1;
        }
    }

    fn ended(&self, position: u64, failed: Option<&str>) {
        let due = {
            let mut inner = self.lock();
            let Some((handle, count)) = inner.positions.get_mut(&position) else {
                return;
            };
            *count -= 1;
            let handle = *handle;
            if *count == 0 {
                inner.positions.remove(&position);
            }
            let Some(flight) = inner.flight.get_mut(&handle) else {
                return;
            };
            flight.outstanding = flight.outstanding.saturating_sub(1);
            if let Some(error) = failed
                && flight.error.is_none()
            {
                flight.error = Some(crate::core::text::clip_message(error.to_owned()));
            }
            self.due(&mut inner, handle)
        };
        Self::settle(due);
    }
}

/// Open every source `c`'s plugin is granted, for run `run_id`, and track
/// their deliveries against `accounting`.
pub(crate) fn open(
    c: &crate::config::ConnectorConfig,
    run_id: &str,
    accounting: &Arc<Accounting>,
    dead_letters: Option<&Arc<DeadLetterFile>>,
    pushes: &crate::source::push::Pushes,
) -> Result<Arc<Deliveries>, String> {
    let mut sources: Vec<(String, Arc<dyn Source>)> = Vec::new();
    for (name, grant) in c.plugin.grants.sources() {
        let at = crate::source::Opening {
            run_id,
            pipeline: &c.pipeline,
            connector: &c.name,
            name,
            pushes,
        };
        let source = match crate::source::open(grant, &at) {
            Ok(source) => source,
            Err(e) => {
                for (_, opened) in &sources {
                    opened.close();
                }
                return Err(e);
            }
        };
        tracing::info!(source = %name, reads = %source.describe(), "source opened");
        sources.push((name.to_owned(), source));
    }
    let deliveries = Arc::new(Deliveries::new(
        &c.pipeline,
        &c.name,
        run_id,
        sources,
        accounting,
        dead_letters.cloned(),
    ));
    accounting
        .positions
        .set(Arc::clone(&deliveries) as Arc<dyn Positions>)
        .map_err(|_| "the connector's deliveries were opened twice".to_owned())?;
    Ok(deliveries)
}

#[cfg(test)]
#[path = "deliveries_tests.rs"]
mod tests;
