//! The indexer loop: batches documents by count, bytes and time since the
//! last add; sends each batch through the indexer plugin, retrying what is
//! worth retrying; reports FINISH or FAIL for every document.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::publisher::Abort;
use crate::config::IndexerConfig;
use crate::document::Document;
use crate::event::{Event, EventKind};
use crate::messenger::{Failure, IndexerMessenger, MessengerError, Polled};
use crate::plugin::{BatchFailure, DocumentFailure, IndexerInstance};
use crate::telemetry::{self, RunStats};

/// How long a poll waits before the indexer checks for an abort.
const POLL: Duration = Duration::from_millis(50);

/// What became of a batch.
enum BatchOutcome {
    /// Sent; these documents were refused.
    Sent(Vec<DocumentFailure>),
    /// The whole batch failed, after `attempts` tries.
    Failed { message: String, attempts: u32 },
    /// Left undone: the process stops while the batch was being retried.
    Abandoned,
}

pub(crate) struct IndexerLoop {
    pub(crate) pipeline: Arc<str>,
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
}

impl IndexerLoop {
    /// Index until the queue closes or the run aborts.
    pub(crate) fn run(mut self) {
        let stats = Arc::clone(&self.stats);
        let _cpu = crate::telemetry::ThreadCpu::count_into(&stats.indexer_cpu_nanos);
        let result = self.work();
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
            } else {
                self.config
                    .batch_timeout
                    .saturating_sub(last_add.elapsed())
                    .min(POLL)
            };
            match self
                .messenger
                .poll_doc_to_index(wait)
                .map_err(messenger_error)?
            {
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
                    if !batch.is_empty() && last_add.elapsed() >= self.config.batch_timeout {
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
        let outcome = self.send_with_retries(&mut docs)?;
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
        metrics::histogram!(telemetry::INDEX_SECONDS_PER_DOC, "pipeline" => self.pipeline.to_string())
            .record(elapsed.as_secs_f64() / docs.len().max(1) as f64);
        self.report(docs, outcome)
            .map_err(|e| format!("indexer messenger failed: {e}"))
    }

    fn report(&mut self, docs: Vec<Document>, outcome: BatchOutcome) -> Result<(), MessengerError> {
        let (refused, batch_failure) = match outcome {
            BatchOutcome::Sent(failures) => (
                failures
                    .into_iter()
                    .map(|f| (f.index, f))
                    .collect::<HashMap<_, _>>(),
                None,
            ),
            BatchOutcome::Failed { message, attempts } => {
                (HashMap::new(), Some((message, attempts)))
            }
            BatchOutcome::Abandoned => return Ok(()),
        };
        let mut finished = 0u64;
        let mut completed = Vec::with_capacity(docs.len());
        for (index, doc) in docs.into_iter().enumerate() {
            let failure = match (&batch_failure, refused.get(&index)) {
                (Some((message, attempts)), _) => Some(Failure {
                    plugin: self.plugin.to_string(),
                    message: message.clone(),
                    attempts: *attempts,
                }),
                (None, Some(refusal)) => Some(Failure {
                    plugin: self.plugin.to_string(),
                    message: format!(
                        "{}{}{}",
                        refusal.message,
                        refusal
                            .status
                            .map(|s| format!(" (status {s})"))
                            .unwrap_or_default(),
                        if refusal.transient
                            || refusal
                                .status
                                .is_some_and(|s| self.config.retryable_statuses.contains(&s))
                        {
                            " (transient)"
                        } else {
                            ""
                        }
                    ),
                    attempts: 1,
                }),
                (None, None) => None,
            };
            match failure {
                None => {
                    finished += 1;
                    self.messenger
                        .send_event(Event::new(&doc, EventKind::Finish))?;
                    completed.push(doc);
                }
                Some(failure) => {
                    RunStats::add(&self.stats.failed, 1);
                    tracing::warn!(doc_id = doc.id(), message = %failure.message, "document failed in the indexer");
                    let event =
                        Event::new(&doc, EventKind::Fail).with_message(failure.message.clone());
                    self.messenger.send_failed(doc.clone(), &failure)?;
                    self.messenger.send_event(event)?;
                    completed.push(doc);
                }
            }
        }
        RunStats::add(&self.stats.indexed, finished);
        metrics::counter!(telemetry::DOCS_INDEXED, "pipeline" => self.pipeline.to_string())
            .increment(finished);
        self.messenger.batch_complete(&completed)
    }

    fn retryable(&self, failure: &BatchFailure) -> bool {
        failure.connection_failed
            || failure
                .status
                .is_some_and(|s| self.config.retryable_statuses.contains(&s))
    }

    /// Exponential backoff with jitter: between half and all of
    /// `retry_backoff * 2^(attempt-1)`, capped at `retry_max_backoff`.
    fn backoff(&self, attempt: u32) -> Duration {
        let full = self
            .config
            .retry_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.config.retry_max_backoff);
        full.mul_f64(0.5 + fastrand::f64() / 2.0)
    }

    /// Sleep `duration`, waking early when the run aborts or the process stops.
    fn pause(&self, duration: Duration) {
        let until = Instant::now() + duration;
        while !self.abort.is_set() && !self.stop_retrying.is_set() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(POLL));
        }
    }

    fn send_with_retries(&mut self, docs: &mut [Document]) -> Result<BatchOutcome, String> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match self.instance.send_batch(docs) {
                Ok(Ok(failures)) => return Ok(BatchOutcome::Sent(failures)),
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
                    if retry && (self.abort.is_set() || self.stop_retrying.is_set()) {
                        return Ok(BatchOutcome::Abandoned);
                    }
                    if retry {
                        metrics::counter!(telemetry::BATCH_RETRIES, "pipeline" => self.pipeline.to_string()).increment(1);
                        self.pause(self.backoff(attempts));
                        if self.abort.is_set() || self.stop_retrying.is_set() {
                            return Ok(BatchOutcome::Abandoned);
                        }
                        continue;
                    }
                    let status = failure
                        .status
                        .map(|s| format!(" (status {s})"))
                        .unwrap_or_default();
                    return Ok(BatchOutcome::Failed {
                        message: format!(
                            "batch failed after {attempts} attempt{}: {}{status}",
                            if attempts == 1 { "" } else { "s" },
                            failure.message
                        ),
                        attempts,
                    });
                }
                Err(e) if e.is_document_error() => {
                    return Ok(BatchOutcome::Failed {
                        message: e.to_string(),
                        attempts,
                    });
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}
