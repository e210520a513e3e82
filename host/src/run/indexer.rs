//! The indexer loop: batches documents by count, bytes and time since the
//! last add; sends each batch through the indexer plugin, retrying what is
//! worth retrying; reports FINISH or FAIL for every document.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::retry::{self, Backoff};
use super::stop::Abort;
use crate::config::IndexerConfig;
use crate::core::document::Document;
use crate::core::event::{Event, EventKind};
use crate::messenger::{Failure, IndexerMessenger, MessengerError, Polled};
use crate::plugin::{BatchFailure, DocumentFailure, IndexerInstance, PluginError, TrapCause};
use crate::telemetry::RunStats;
use crate::telemetry::events::{DocumentFailed, FailedIn};
use crate::telemetry::meters::{IndexerMeters, Scope};

/// How long a poll waits before the indexer checks for an abort.
const POLL: Duration = Duration::from_millis(50);
/// How long a poll waits, once the source is done, before the indexer
/// looks again whether anything is still on its way.
const TAIL_POLL: Duration = Duration::from_millis(1);
/// The longest a poll waits while a partial batch waits for more.
const PARTIAL_POLL: Duration = Duration::from_millis(10);

/// What became of a batch.
enum BatchOutcome {
    /// Sent; these documents failed (each position at most once).
    Sent(Vec<Refusal>),
    /// Left undone: the process stops while the batch was being retried.
    Abandoned,
}

/// A document of a batch that failed for good.
struct Refusal {
    /// Its position in the batch.
    index: usize,
    message: String,
    attempts: u32,
}

/// Refusals by position in the batch: the last word on each document.
type Refused = HashMap<usize, Refusal>;

/// Record that the document at `index` failed for good.
fn refuse(refused: &mut Refused, index: usize, message: String, attempts: u32) {
    refused.insert(
        index,
        Refusal {
            index,
            message,
            attempts,
        },
    );
}

/// What one send of some of a batch's documents came to.
enum Sent {
    /// The backend answered; these positions (in what was sent) were refused.
    Answered(Vec<DocumentFailure>),
    /// The whole send failed for good, after `attempts` tries.
    Failed {
        message: String,
        attempts: u32,
    },
    Abandoned,
}

pub(crate) struct IndexerLoop {
    pub(crate) pipeline: Arc<str>,
    pub(crate) scope: Scope,
    pub(crate) meters: IndexerMeters,
    pub(crate) plugin: Arc<str>,
    pub(crate) instance: IndexerInstance,
    pub(crate) messenger: Box<dyn IndexerMessenger>,
    pub(crate) config: IndexerConfig,
    pub(crate) stats: Arc<RunStats>,
    pub(crate) abort: Abort,
    /// Set when the process is asked to stop: a batch that is failing in a
    /// way worth retrying is then left undone (never reported, never
    /// committed) for the next owner of its documents, not dead-lettered.
    pub(crate) stop_retrying: Abort,
    /// A batch was left undone: nothing after it may be indexed (its
    /// completion would commit the undone batch too), so the loop ends.
    pub(crate) abandoned: bool,
    /// Where failed documents go besides the messenger (local mode).
    pub(crate) dead_letters: Option<Arc<super::dead_letters::DeadLetterFile>>,
}

impl IndexerLoop {
    /// Index until the queue closes or the run aborts.
    pub(crate) fn run(mut self) {
        let stats = Arc::clone(&self.stats);
        let _cpu = crate::telemetry::ThreadCpu::count_into(&stats.indexer_cpu_nanos);
        self.abort.watch_calls(self.instance.canceller());
        let result = self.work();
        // A stopped run cancelled its calls; `close` still runs, under its
        // own deadline.
        self.instance.canceller().reset();
        if let Err(e) = self.instance.close() {
            tracing::warn!(plugin = %self.plugin, error = %e, "indexer close failed");
        }
        if let Err(reason) = result {
            tracing::error!(pipeline = %self.pipeline, %reason, "indexer stopped the run");
            self.abort.trigger(reason);
        }
    }

    fn work(&mut self) -> Result<(), String> {
        let messenger_error = |e: MessengerError| format!("indexer messenger failed: {e}");
        let mut batch: Vec<Document> = Vec::with_capacity(self.config.batch_size);
        let mut bytes = 0usize;
        let mut last_add = Instant::now();
        loop {
            if self.abort.is_set() || self.abandoned {
                return Ok(());
            }
            let wait = if batch.is_empty() {
                POLL
            } else if self.messenger.draining() {
                // The source is done: a partial batch goes as soon as
                // nothing is on its way here.
                if self.messenger.upstream_idle() {
                    Duration::ZERO
                } else {
                    TAIL_POLL
                }
            } else {
                // In slices: a source that finishes meanwhile is seen
                // within one, whatever the batch timeout.
                self.config
                    .batch_timeout
                    .saturating_sub(last_add.elapsed())
                    .min(PARTIAL_POLL)
            };
            // A partial batch is filled without waking for each document.
            let polled = if batch.is_empty() {
                self.messenger.poll_doc_to_index(wait)
            } else {
                self.messenger.poll_gathering(wait)
            };
            match polled.map_err(messenger_error)? {
                Polled::Item(doc) => {
                    bytes += doc.approx_json_bytes();
                    batch.push(doc);
                    last_add = Instant::now();
                    if batch.len() >= self.config.batch_size || bytes >= self.config.batch_max_bytes
                    {
                        self.flush(&mut batch)?;
                        bytes = 0;
                    }
                }
                Polled::Idle => {
                    let due = last_add.elapsed() >= self.config.batch_timeout
                        || self.messenger.upstream_idle();
                    if !batch.is_empty() && due {
                        self.flush(&mut batch)?;
                        bytes = 0;
                    }
                }
                Polled::Closed => {
                    if !batch.is_empty() {
                        self.flush(&mut batch)?;
                    }
                    return Ok(());
                }
            }
        }
    }

    fn flush(&mut self, batch: &mut Vec<Document>) -> Result<(), String> {
        let mut docs = std::mem::replace(batch, Vec::with_capacity(self.config.batch_size));
        self.messenger.drop_revoked(&mut docs);
        if docs.is_empty() {
            return self
                .messenger
                .batch_complete(&docs)
                .map_err(|e| format!("indexer messenger failed: {e}"));
        }
        let start = Instant::now();
        self.meters.batch_size.record(docs.len() as f64);
        let outcome = self.send_with_retries(&docs)?;
        if let BatchOutcome::Abandoned = outcome {
            self.abandoned = true;
            tracing::warn!(
                docs = docs.len(),
                "stopping with a batch the backend has not taken: left to be redelivered, not dead-lettered"
            );
            return Ok(());
        }
        let elapsed = start.elapsed();
        RunStats::add_time(&self.stats.index_nanos, elapsed);
        self.report(docs, outcome)
            .map_err(|e| format!("indexer messenger failed: {e}"))
    }

    fn report(&mut self, docs: Vec<Document>, outcome: BatchOutcome) -> Result<(), MessengerError> {
        let mut refused = match outcome {
            BatchOutcome::Sent(refused) => refused
                .into_iter()
                .map(|r| (r.index, r))
                .collect::<HashMap<_, _>>(),
            BatchOutcome::Abandoned => return Ok(()),
        };
        let (mut finished, mut deleted) = (0u64, 0u64);
        let mut completed = Vec::with_capacity(docs.len());
        for (index, doc) in docs.into_iter().enumerate() {
            match refused.remove(&index) {
                None => {
                    finished += 1;
                    deleted += u64::from(doc.is_deleted());
                    self.messenger
                        .send_event(Event::new(&doc, EventKind::Finish))?;
                    completed.push(doc);
                }
                Some(refusal) => {
                    DocumentFailed {
                        scope: &self.scope,
                        stats: &self.stats,
                        place: FailedIn::Indexer,
                        plugin: &self.plugin,
                        doc_id: doc.id(),
                        run_id: doc.run_id(),
                        message: &refusal.message,
                    }
                    .emit();
                    let failure = Failure {
                        plugin: self.plugin.to_string(),
                        message: refusal.message,
                        attempts: refusal.attempts,
                        reason: None,
                    };
                    let event =
                        Event::new(&doc, EventKind::Fail).with_message(failure.message.clone());
                    if let Some(letters) = &self.dead_letters {
                        letters
                            .write(&self.pipeline, &doc, &failure)
                            .map_err(MessengerError::Transport)?;
                        self.scope.dead_lettered();
                    }
                    self.messenger.send_failed(doc.clone(), &failure)?;
                    self.messenger.send_event(event)?;
                    completed.push(doc);
                }
            }
        }
        RunStats::add(&self.stats.indexed, finished);
        self.meters.indexed.increment(finished);
        self.meters.deleted.increment(deleted);
        self.messenger.batch_complete(&completed)?;
        self.messenger.retire(completed);
        Ok(())
    }

    /// Whether a backend status is one the config retries.
    fn retryable_status(&self, status: Option<u16>) -> bool {
        status.is_some_and(|s| self.config.retryable_statuses.contains(&s))
    }

    fn retryable(&self, failure: &BatchFailure) -> bool {
        failure.connection_failed || self.retryable_status(failure.status)
    }

    fn backoff(&self, attempt: u32) -> Duration {
        Backoff {
            max_retries: self.config.max_retries,
            first: self.config.retry_backoff,
            max: self.config.retry_max_backoff,
        }
        .delay(attempt)
    }

    /// Sleep `duration`, waking early when the run aborts or the process stops.
    fn pause(&self, duration: Duration) {
        retry::pause(duration, || self.stopping());
    }

    fn stopping(&self) -> bool {
        self.abort.is_set() || self.stop_retrying.is_set()
    }

    /// Send `docs`, then send again, with backoff, the documents the backend
    /// refused in a way worth retrying (transient, or a retryable status),
    /// up to `max_retries` times each. A retried document takes with it the
    /// later documents of the batch with its id, so the last version sent
    /// is still the last indexed; each document's outcome is its last send's.
    fn send_with_retries(&mut self, docs: &[Document]) -> Result<BatchOutcome, String> {
        let mut refused = Refused::new();
        // Positions to send, in batch order, and how often each was sent.
        let mut pending: Vec<usize> = (0..docs.len()).collect();
        let mut attempts = vec![0u32; docs.len()];
        loop {
            let sent = if pending.len() == docs.len() {
                self.send_retrying_batch(docs)?
            } else {
                let subset: Vec<Document> = pending.iter().map(|&i| docs[i].clone()).collect();
                self.send_retrying_batch(&subset)?
            };
            for &i in &pending {
                attempts[i] += 1;
                refused.remove(&i);
            }
            let failures = match sent {
                Sent::Abandoned => return Ok(BatchOutcome::Abandoned),
                Sent::Failed {
                    message,
                    attempts: tries,
                } => {
                    for &index in &pending {
                        let attempts = attempts[index] - 1 + tries;
                        refuse(&mut refused, index, message.clone(), attempts);
                    }
                    break;
                }
                Sent::Answered(failures) => failures,
            };
            let mut retry = Vec::new();
            for failure in failures {
                let index = pending[failure.index];
                let worth = failure.transient || self.retryable_status(failure.status);
                if worth && attempts[index] <= self.config.max_retries {
                    retry.push(index);
                }
                let mut message = failure.message;
                if let Some(status) = failure.status {
                    message.push_str(&format!(" (status {status})"));
                }
                if worth {
                    let tries = retry::attempts_text(attempts[index]);
                    message.push_str(&format!(" (transient; {tries})"));
                }
                refuse(&mut refused, index, message, attempts[index]);
            }
            if retry.is_empty() {
                break;
            }
            if self.stopping() {
                // Left for the next owner of these documents, as a batch.
                return Ok(BatchOutcome::Abandoned);
            }
            pending = with_later_versions(docs, &pending, &retry);
            self.meters.document_retries.increment(retry.len() as u64);
            tracing::debug!(
                plugin = %self.plugin,
                refused = retry.len(),
                resend = pending.len(),
                "retrying documents the backend refused for now"
            );
            self.pause(self.backoff(retry.iter().map(|&i| attempts[i]).max().unwrap_or(1)));
            if self.stopping() {
                return Ok(BatchOutcome::Abandoned);
            }
        }
        let mut refused: Vec<Refusal> = refused.into_values().collect();
        refused.sort_by_key(|r| r.index);
        Ok(BatchOutcome::Sent(refused))
    }

    /// Send `docs` as one batch, retrying a whole-batch failure worth
    /// retrying with backoff.
    fn send_retrying_batch(&mut self, docs: &[Document]) -> Result<Sent, String> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let call = Instant::now();
            let sent = self.instance.send_batch(docs);
            self.meters.call_seconds.record(call.elapsed());
            match sent {
                Ok(Ok(failures)) => return Ok(Sent::Answered(failures)),
                Ok(Err(failure)) => {
                    let retry = self.retryable(&failure) && attempts <= self.config.max_retries;
                    tracing::warn!(
                        plugin = %self.plugin,
                        docs = docs.len(),
                        attempt = attempts,
                        status = failure.status,
                        retry,
                        "batch failed: {}", failure.message
                    );
                    if retry && self.stopping() {
                        return Ok(Sent::Abandoned);
                    }
                    if retry {
                        self.meters.batch_retries.increment(1);
                        self.pause(self.backoff(attempts));
                        if self.stopping() {
                            return Ok(Sent::Abandoned);
                        }
                        continue;
                    }
                    let status = failure
                        .status
                        .map(|s| format!(" (status {s})"))
                        .unwrap_or_default();
                    return Ok(Sent::Failed {
                        message: format!(
                            "batch failed after {}: {}{status}",
                            retry::attempts_text(attempts),
                            failure.message
                        ),
                        attempts,
                    });
                }
                // The run is stopping and cut the call short: the batch is
                // left for redelivery, not failed.
                Err(PluginError::Trap {
                    cause: TrapCause::Cancelled,
                    ..
                }) if self.stopping() => return Ok(Sent::Abandoned),
                Err(e) if e.is_document_error() => {
                    return Ok(Sent::Failed {
                        message: e.to_string(),
                        attempts,
                    });
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// The positions to send again: those in `retry`, and after each, every
/// later position of `sent` holding a document with the same id (a later
/// version must land after the earlier one it follows), in batch order.
fn with_later_versions(docs: &[Document], sent: &[usize], retry: &[usize]) -> Vec<usize> {
    let retried: std::collections::HashSet<usize> = retry.iter().copied().collect();
    let mut first_retry: HashMap<&str, usize> = HashMap::new();
    for &i in retry {
        let first = first_retry.entry(docs[i].id()).or_insert(i);
        *first = (*first).min(i);
    }
    sent.iter()
        .copied()
        .filter(|&i| {
            retried.contains(&i)
                || first_retry
                    .get(docs[i].id())
                    .is_some_and(|&first| first < i)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retried_document_takes_its_later_versions_but_not_earlier_ones() {
        let docs: Vec<Document> = ["a", "b", "a", "c", "b", "a"]
            .into_iter()
            .map(Document::new)
            .collect();
        let all: Vec<usize> = (0..docs.len()).collect();
        // `a` at 2 refused: `a` at 5 goes again, `a` at 0 (earlier) does not.
        assert_eq!(with_later_versions(&docs, &all, &[2]), [2, 5]);
        assert_eq!(with_later_versions(&docs, &all, &[4, 0]), [0, 2, 4, 5]);
        assert_eq!(with_later_versions(&docs, &all, &[3]), [3]);
        // Within a resend, positions it did not send stay out.
        assert_eq!(with_later_versions(&docs, &[2, 3, 5], &[3]), [3]);
        assert_eq!(with_later_versions(&docs, &[0, 5], &[0]), [0, 5]);
    }
}
