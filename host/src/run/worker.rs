//! A worker: polls documents, runs them through the pipeline's stages, and
//! sends each outcome on (children first, then their parent).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::dead_letters::DeadLetterFile;
use super::stages::{Halt, Outcome, Stages, gathering};
pub(crate) use super::stages::{StageRetry, StageSlot};
use super::stop::Abort;
use crate::config::StageBatch;
use crate::core::document::Document;
use crate::core::event::{Event, EventKind};
use crate::messenger::{Failure, MessengerError, Polled, WorkerMessenger};
use crate::telemetry::events::{DocumentFailed, FailedIn, StagesSwitched};
use crate::telemetry::meters::{PipelineMeters, Scope};
use crate::telemetry::{self, RunStats};

/// How long a poll waits before the worker checks for an abort.
const POLL: Duration = Duration::from_millis(50);
/// The longest one poll waits while a batch is gathered.
const GATHER_SLICE: Duration = Duration::from_millis(10);
/// How long a worker fresh from a batch lets documents build up before it
/// waits for the next one.
const SETTLE: Duration = Duration::from_millis(1);

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

    /// `documents` more, which took `elapsed` together and ended at `now`.
    fn add(&mut self, documents: u64, elapsed: Duration, now: Instant) {
        self.documents += documents;
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
    /// New stages a reload hands the workers, and the generation this
    /// worker runs.
    pub(crate) reloads: super::reload::Reloads,
    pub(crate) generation: u64,
    /// The taps its documents are offered to.
    pub(crate) taps: crate::telemetry::tap::Taps,
}

impl Worker {
    /// Work until the source closes or the run aborts; a fatal error aborts it.
    pub(crate) fn run(mut self) {
        let stats = Arc::clone(&self.stats);
        let _cpu = telemetry::ThreadCpu::count_into(&stats.worker_cpu_nanos);
        let _counted = self.reloads.worker();
        for stage in &self.stages {
            for cancel in stage.cancellers() {
                self.abort.watch_calls(cancel);
            }
        }
        let result = self.work();
        for stage in &mut self.stages {
            // A stopped run cancelled its calls; `stop` still runs, under
            // its own deadline.
            for cancel in stage.cancellers() {
                cancel.reset();
            }
            stage.stop();
        }
        if let Err(reason) = result {
            tracing::error!(pipeline = %self.pipeline, %reason, "worker stopped the run");
            self.abort.trigger(reason);
        }
    }

    fn work(&mut self) -> Result<(), String> {
        let messenger_error = |e: MessengerError| format!("worker messenger failed: {e}");
        let mut counted = LocalCount::new(&self.stats);
        let mut gather = gathering(&self.stages);
        gather.size = gather.size.min(self.messenger.max_in_hand()).max(1);
        // Reused from batch to batch.
        let (mut docs, mut outcomes) = (Vec::new(), Vec::new());
        loop {
            if self.abort.is_set() {
                return Ok(());
            }
            if self.pause.is_paused() {
                counted.flush();
                if !self.pause.hold_worker(|| self.abort.is_set()) {
                    return Ok(());
                }
            }
            let closed = self.gather(gather, &mut docs).map_err(messenger_error)?;
            // Between batches, with nothing in hand but what was just
            // gathered: new stages take these documents.
            if let Some(set) = self.reloads.newer(self.generation) {
                self.switch(&set);
                gather = gathering(&self.stages);
                gather.size = gather.size.min(self.messenger.max_in_hand()).max(1);
            }
            if docs.is_empty() {
                if closed {
                    return Ok(());
                }
                counted.flush();
                continue;
            }
            let n = docs.len() as u64;
            let start = Instant::now();
            let halt = self.process(std::mem::take(&mut docs), &mut outcomes);
            if let Some(Halt::Abandoned) = halt {
                outcomes.clear();
                return Ok(());
            }
            let now = Instant::now();
            let elapsed = now.duration_since(start);
            // Each document's share of its batch's time.
            let each = elapsed / u32::try_from(n).unwrap_or(u32::MAX);
            for _ in 0..n {
                self.meters.seconds.record(each);
            }
            self.meters.processed.increment(n);
            counted.add(n, elapsed, now);
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
            if closed {
                return Ok(());
            }
        }
    }

    /// Take up the stages of `set` (see [`super::reload`]): new instances,
    /// when this worker's pipeline changed, the old ones stopped.
    fn switch(&mut self, set: &super::reload::StageSet) {
        let generation = set.generation;
        let changed = set.changed_since(&self.pipeline, self.generation);
        if changed {
            match super::stages::start_stages(&set.plugins, &set.config, &self.scope) {
                Ok(mut stages) => {
                    for slot in &mut stages {
                        slot.stats = self.stats.stage(&self.pipeline, &slot.name);
                        for cancel in slot.cancellers() {
                            self.abort.watch_calls(cancel);
                        }
                    }
                    for mut old in std::mem::replace(&mut self.stages, stages) {
                        for cancel in old.cancellers() {
                            self.abort.unwatch_calls(cancel);
                        }
                        old.stop();
                    }
                }
                Err(error) => {
                    // Validated, so rare (an instance the machine could not
                    // hold): this worker goes on as it was, and is not
                    // counted as switched.
                    StagesSwitched {
                        scope: &self.scope,
                        generation,
                        started: false,
                        failed: Some(&error),
                    }
                    .emit();
                    self.generation = generation;
                    return;
                }
            }
        }
        self.generation = generation;
        StagesSwitched {
            scope: &self.scope,
            generation,
            started: changed,
            failed: None,
        }
        .emit();
        self.reloads.switched(set);
    }

    /// Poll up to `gather.size` documents into `docs`: the first within
    /// [`POLL`], the rest within `gather.wait` of it (and within
    /// [`StageBatch::MAX_BYTES`] together). Whether the source is closed.
    fn gather(
        &mut self,
        gather: StageBatch,
        docs: &mut Vec<Document>,
    ) -> Result<bool, MessengerError> {
        // Fresh from a batch, a worker that finds its queue empty lets the
        // next documents build up for a moment before it sleeps until one
        // comes: a worker faster than its connector then wakes once for
        // many documents, not once for each. Once the source is done,
        // nothing is worth waiting for.
        let first = if self.messenger.draining() {
            Polled::Idle
        } else {
            // Only the moment: a worker with nothing in hand counts as
            // waiting (see `draining`) once it polls below.
            self.messenger.poll_gathering(SETTLE)?
        };
        let first = match first {
            Polled::Idle => self.messenger.poll_doc_to_process(POLL)?,
            polled => polled,
        };
        match first {
            Polled::Item(doc) => docs.push(doc),
            Polled::Idle => return Ok(false),
            Polled::Closed => return Ok(true),
        }
        // Once the source is done, what is queued is all there is to wait
        // for. The wait goes in slices, so that a source finishing during
        // a long one is seen within a slice.
        let deadline = Instant::now() + gather.wait;
        let mut bytes = docs[0].approx_json_bytes();
        while docs.len() < gather.size && bytes < StageBatch::MAX_BYTES {
            let left = if self.messenger.draining() {
                Duration::ZERO
            } else {
                deadline
                    .saturating_duration_since(Instant::now())
                    .min(GATHER_SLICE)
            };
            match self.messenger.poll_gathering(left)? {
                Polled::Item(doc) => {
                    bytes += doc.approx_json_bytes();
                    docs.push(doc);
                }
                // A slice ended: wait on unless the batch's wait is over.
                Polled::Idle if !left.is_zero() && Instant::now() < deadline => {}
                Polled::Idle => break,
                Polled::Closed => return Ok(true),
            }
        }
        Ok(false)
    }

    /// What became of `docs` and their children (into `outcomes`), and
    /// whether processing halts. A panic in host code fails the batch's
    /// documents (never the worker), so every document gets a terminal event.
    fn process(&mut self, docs: Vec<Document>, outcomes: &mut Vec<Outcome>) -> Option<Halt> {
        let ids: Vec<(String, Option<String>)> = docs
            .iter()
            .map(|d| (d.id().to_owned(), d.run_id().map(str::to_owned)))
            .collect();
        let mut stages = Stages {
            stages: &mut self.stages,
            retry: self.retry,
            abort: &self.abort,
            taps: &self.taps,
        };
        let processed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stages.run(docs, outcomes)));
        processed.unwrap_or_else(|panic| {
            let message = format!(
                "the host failed while processing it (a bug in Weir, please report it): {}",
                crate::core::text::panic_text(&*panic)
            );
            tracing::error!(documents = ids.len(), %message, "worker caught a panic");
            // What the stages made before the panic goes nowhere: the
            // documents fail whole.
            outcomes.clear();
            for (id, run_id) in ids {
                let mut stub = Document::new(id);
                stub.set_run_id(run_id);
                let failure = Failure {
                    plugin: "weir".into(),
                    message: message.clone(),
                    attempts: 1,
                    reason: None,
                };
                outcomes.push(Outcome::Failed(stub, failure));
            }
            None
        })
    }

    fn send(&mut self, outcome: Outcome) -> Result<(), MessengerError> {
        match outcome {
            Outcome::Created(event) => self.messenger.send_event(event),
            Outcome::Index(doc) => {
                if self.taps.any() {
                    self.taps.offer(&self.pipeline, None, &doc);
                }
                self.messenger.send_for_indexing(doc)
            }
            Outcome::Dropped(doc, by) => {
                RunStats::add(&self.stats.dropped, 1);
                self.meters.dropped.increment(1);
                let mut event = Event::new(&doc, EventKind::Drop);
                if let Some(stage) = by {
                    event = event.with_stage(&stage);
                }
                self.messenger.send_event(event)
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
                let event = Event::new(&doc, EventKind::Fail)
                    .with_message(failure.message.clone())
                    .with_stage(&failure.plugin);
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
