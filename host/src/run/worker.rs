//! A worker: polls documents, runs them through the pipeline's stages, and
//! sends each outcome on (children first, then their parent).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::dead_letters::DeadLetterFile;
use super::publisher::Abort;
use super::retry::{self, Backoff};
use crate::config::WorkerConfig;
use crate::core::document::Document;
use crate::core::event::{Event, EventKind};
use crate::messenger::{Failure, MessengerError, Polled, WorkerMessenger};
use crate::plugin::{PluginError, StageInstance, TrapCause};
use crate::telemetry::events::{DocumentFailed, FailedIn};
use crate::telemetry::meters::{PipelineMeters, Scope, StageMeters};
use crate::telemetry::{self, RunStats, StageStats};

/// How long a poll waits before the worker checks for an abort.
const POLL: Duration = Duration::from_millis(50);

/// One stage instance of a worker, with its metrics.
pub(crate) struct StageSlot {
    pub(crate) name: Arc<str>,
    pub(crate) instance: StageInstance,
    /// Its figures for the run summary, shared with its other instances.
    pub(crate) stats: Arc<StageStats>,
    meters: StageMeters,
}

impl StageSlot {
    pub(crate) fn new(scope: &Scope, name: &str, instance: StageInstance) -> Self {
        Self {
            name: Arc::from(name),
            meters: StageMeters::new(scope, name),
            stats: Arc::default(),
            instance,
        }
    }
}

/// Documents processed and their time, counted here and added to the run's
/// figures every [`LocalCount::EVERY`] documents or [`LocalCount::AGE`] of
/// time, when the worker is idle, and when it stops: workers never contend
/// for the shared counters, and slow documents still show as progress.
struct LocalCount {
    stats: Arc<RunStats>,
    documents: u64,
    nanos: u64,
    flushed: Instant,
}

impl LocalCount {
    const EVERY: u64 = 64;
    const AGE: Duration = Duration::from_secs(1);

    fn new(stats: &Arc<RunStats>) -> Self {
        Self {
            stats: Arc::clone(stats),
            documents: 0,
            nanos: 0,
            flushed: Instant::now(),
        }
    }

    /// One more document, which took `elapsed` and ended at `now`.
    fn add(&mut self, elapsed: Duration, now: Instant) {
        self.documents += 1;
        self.nanos = self
            .nanos
            .saturating_add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
        if self.documents >= Self::EVERY || now.duration_since(self.flushed) >= Self::AGE {
            self.flush();
            self.flushed = now;
        }
    }

    fn flush(&mut self) {
        if self.documents > 0 {
            RunStats::add(&self.stats.processed, std::mem::take(&mut self.documents));
            RunStats::add(&self.stats.pipeline_nanos, std::mem::take(&mut self.nanos));
        }
    }
}

impl Drop for LocalCount {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Why a worker stops processing a document before its end.
enum Halt {
    /// A fatal plugin error: the run must stop; the document's outcome is sent.
    Fatal(String),
    /// The run is stopping and cut the document's stage call short: nothing
    /// of it is sent or committed (it stays pending, or is redelivered).
    Abandoned,
}

/// What became of one document (or one of its children).
enum Outcome {
    Created(Event),
    Index(Document),
    Dropped(Document),
    Failed(Document, Failure),
}

/// Which failed stage calls are made again, and when.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StageRetry {
    backoff: Backoff,
    traps: bool,
}

impl StageRetry {
    pub(crate) fn new(config: &WorkerConfig) -> Self {
        Self {
            backoff: Backoff {
                max_retries: config.max_retries,
                first: config.retry_backoff,
                max: config.retry_max_backoff,
            },
            traps: config.retry_traps,
        }
    }

    /// Whether a call that failed with `error` after `attempts` goes again.
    fn again(&self, error: &PluginError, attempts: u32) -> bool {
        attempts <= self.backoff.max_retries
            && match error {
                PluginError::Document { transient, .. } => *transient,
                PluginError::Trap { cause, .. } => {
                    self.traps && !matches!(cause, TrapCause::Cancelled | TrapCause::HostPanic(_))
                }
                _ => false,
            }
    }
}

pub(crate) struct Worker {
    pub(crate) pipeline: Arc<str>,
    /// The labels of its metrics, and its pipeline's meters.
    pub(crate) scope: Scope,
    pub(crate) meters: PipelineMeters,
    pub(crate) stages: Vec<StageSlot>,
    pub(crate) messenger: Box<dyn WorkerMessenger>,
    pub(crate) stats: Arc<RunStats>,
    pub(crate) abort: Abort,
    pub(crate) retry: StageRetry,
    /// Where failed documents go besides the messenger (local mode).
    pub(crate) dead_letters: Option<Arc<DeadLetterFile>>,
    /// While paused, nothing is polled.
    pub(crate) pause: super::Pause,
}

impl Worker {
    /// Work until the source closes or the run aborts; a fatal error aborts it.
    pub(crate) fn run(mut self) {
        let stats = Arc::clone(&self.stats);
        let _cpu = telemetry::ThreadCpu::count_into(&stats.worker_cpu_nanos);
        for stage in &self.stages {
            self.abort.watch_calls(stage.instance.canceller());
        }
        let result = self.work();
        for stage in &mut self.stages {
            // A stopped run cancelled its calls; `stop` still runs, under
            // its own deadline.
            stage.instance.canceller().reset();
            if let Err(e) = stage.instance.stop() {
                tracing::warn!(stage = %stage.name, error = %e, "stage stop failed");
            }
        }
        if let Err(reason) = result {
            tracing::error!(pipeline = %self.pipeline, %reason, "worker stopped the run");
            self.abort.trigger(reason);
        }
    }

    fn work(&mut self) -> Result<(), String> {
        let messenger_error = |e: MessengerError| format!("worker messenger failed: {e}");
        let mut counted = LocalCount::new(&self.stats);
        // Reused from document to document.
        let mut outcomes = Vec::new();
        loop {
            if self.abort.is_set() {
                return Ok(());
            }
            if self.pause.is_paused() {
                counted.flush();
                if !self.pause.wait(|| self.abort.is_set()) {
                    return Ok(());
                }
            }
            let doc = match self
                .messenger
                .poll_doc_to_process(POLL)
                .map_err(messenger_error)?
            {
                Polled::Item(doc) => doc,
                Polled::Idle => {
                    counted.flush();
                    continue;
                }
                Polled::Closed => return Ok(()),
            };
            let span = tracing::debug_span!("document", run_id = doc.run_id(), doc_id = doc.id());
            let _entered = span.enter();
            let start = Instant::now();
            let halt = self.process(doc, &mut outcomes);
            if let Some(Halt::Abandoned) = halt {
                outcomes.clear();
                return Ok(());
            }
            let now = Instant::now();
            let elapsed = now.duration_since(start);
            self.meters.seconds.record(elapsed);
            self.meters.processed.increment(1);
            counted.add(elapsed, now);
            for outcome in outcomes.drain(..) {
                self.send(outcome).map_err(messenger_error)?;
            }
            // A document whose outputs or events could not be handed on
            // must never be skipped: the worker stops, and what it did not
            // commit is redelivered to the next one.
            self.messenger
                .commit_pending_doc_offsets()
                .map_err(messenger_error)?;
            if let Some(Halt::Fatal(reason)) = halt {
                return Err(reason);
            }
        }
    }

    /// What became of `doc` and its children (into `outcomes`), and whether
    /// processing halts. A panic in host code fails the document (never the
    /// worker), so every document gets a terminal event.
    fn process(&mut self, doc: Document, outcomes: &mut Vec<Outcome>) -> Option<Halt> {
        let (id, run_id) = (doc.id().to_owned(), doc.run_id().map(str::to_owned));
        let pipeline = Pipeline {
            stages: &mut self.stages,
            retry: self.retry,
            abort: &self.abort,
        };
        let processed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pipeline.run(doc, 0, outcomes)
        }));
        processed.unwrap_or_else(|panic| {
            let message = format!(
                "the host failed while processing it (a bug in Weir, please report it): {}",
                crate::core::text::panic_text(&*panic)
            );
            tracing::error!(doc_id = %id, %message, "worker caught a panic");
            let mut stub = Document::new(id);
            stub.set_run_id(run_id);
            let failure = Failure {
                plugin: "weir".into(),
                message,
                attempts: 1,
            };
            // What the stages made before the panic goes nowhere: the
            // document fails whole.
            outcomes.clear();
            outcomes.push(Outcome::Failed(stub, failure));
            None
        })
    }

    fn send(&mut self, outcome: Outcome) -> Result<(), MessengerError> {
        match outcome {
            Outcome::Created(event) => self.messenger.send_event(event),
            Outcome::Index(doc) => self.messenger.send_for_indexing(doc),
            Outcome::Dropped(doc) => {
                RunStats::add(&self.stats.dropped, 1);
                self.meters.dropped.increment(1);
                self.messenger.send_event(Event::new(&doc, EventKind::Drop))
            }
            Outcome::Failed(doc, failure) => {
                DocumentFailed {
                    scope: &self.scope,
                    stats: &self.stats,
                    place: FailedIn::Pipeline,
                    plugin: &failure.plugin,
                    doc_id: doc.id(),
                    run_id: doc.run_id(),
                    message: &failure.message,
                }
                .emit();
                let event = Event::new(&doc, EventKind::Fail).with_message(failure.message.clone());
                if let Some(letters) = &self.dead_letters {
                    letters
                        .write(&self.pipeline, &doc, &failure)
                        .map_err(MessengerError::Transport)?;
                    self.scope.dead_lettered();
                }
                self.messenger.send_failed(doc, &failure)?;
                self.messenger.send_event(event)
            }
        }
    }
}

/// A worker's stages, with what it needs to retry a call.
struct Pipeline<'a> {
    stages: &'a mut [StageSlot],
    retry: StageRetry,
    abort: &'a Abort,
}

impl Pipeline<'_> {
    /// Run `doc` through `stages[from..]`, appending what became of it and
    /// of the children it made. Children are run through the stages after
    /// the one that made them, and go on ahead of their parent. Returns why
    /// it halted, if it did: a fatal plugin error, or a call the stopping
    /// run cut short.
    fn run(mut self, doc: Document, from: usize, out: &mut Vec<Outcome>) -> Option<Halt> {
        self.run_from(doc, from, out)
    }

    fn run_from(&mut self, mut doc: Document, from: usize, out: &mut Vec<Outcome>) -> Option<Halt> {
        for i in from..self.stages.len() {
            if doc.is_dropped() || doc.skips_stages() {
                break;
            }
            let (result, attempts) = self.call(i, &mut doc);
            match result {
                Ok(children) => {
                    self.stages[i]
                        .meters
                        .created
                        .increment(children.len() as u64);
                    for child in children {
                        out.push(Outcome::Created(Event::new(&child, EventKind::Create)));
                        if let Some(reason) = self.run_from(child, i + 1, out) {
                            return Some(reason);
                        }
                    }
                }
                Err(PluginError::Trap {
                    cause: TrapCause::Cancelled,
                    ..
                }) if self.abort.is_set() => return Some(Halt::Abandoned),
                Err(e) => {
                    let fatal = (!e.is_document_error()).then(|| Halt::Fatal(e.to_string()));
                    let mut message = e.to_string();
                    if attempts > 1 {
                        message.push_str(&format!(" (after {})", retry::attempts_text(attempts)));
                    }
                    let failure = Failure {
                        plugin: self.stages[i].name.to_string(),
                        message,
                        attempts,
                    };
                    out.push(Outcome::Failed(doc, failure));
                    return fatal;
                }
            }
        }
        out.push(if doc.is_dropped() {
            Outcome::Dropped(doc)
        } else {
            Outcome::Index(doc)
        });
        None
    }

    /// Stage `i` on `doc`, made again with backoff while it fails in a way
    /// the retry policy retries; the outcome and how many calls it took.
    fn call(&mut self, i: usize, doc: &mut Document) -> (Result<Vec<Document>, PluginError>, u32) {
        let stage = &mut self.stages[i];
        let restarts_before = stage.instance.restarts();
        let mut attempts = 1;
        let start = Instant::now();
        let result = loop {
            let result = stage.instance.process(doc);
            match &result {
                Err(e) if self.retry.again(e, attempts) => {
                    tracing::debug!(doc_id = doc.id(), stage = %stage.name, attempts, error = %e, "retrying a stage call");
                    let delay = self.retry.backoff.delay(attempts);
                    if !retry::pause(delay, || self.abort.is_set()) {
                        break result;
                    }
                    attempts += 1;
                }
                _ => break result,
            }
        };
        let elapsed = start.elapsed();
        stage.meters.call_seconds.record(elapsed);
        if attempts > 1 {
            stage.meters.retries.increment(u64::from(attempts - 1));
        }
        RunStats::add(&stage.stats.documents, 1);
        RunStats::add(&stage.stats.retries, u64::from(attempts - 1));
        RunStats::add_time(&stage.stats.nanos, elapsed);
        match &result {
            Ok(children) => RunStats::add(&stage.stats.children, children.len() as u64),
            Err(_) => RunStats::add(&stage.stats.failed, 1),
        }
        let restarts = stage.instance.restarts() - restarts_before;
        if restarts > 0 {
            stage.meters.restarts.increment(restarts);
        }
        (result, attempts)
    }
}
