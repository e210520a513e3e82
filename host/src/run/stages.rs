//! A worker's stages over a batch of documents.
//!
//! Each stage is called on the documents still in flight, in chunks of its
//! `batch.size` (a document stage is called once per document). Children
//! join the next stage ahead of their parent. What became of each document
//! is laid out as a worker taking one document at a time would send it:
//! each child, with everything that became of it, ahead of its parent.
//!
//! A batch call that traps is made again document by document, each from
//! where it was before the call, so a poison document fails only itself;
//! the retry rules then apply to each document as they always have.
//!
//! [`start_stages`] starts one worker's stage instances (with their
//! conditions and shadows), for workers, serving processes and cases.

use std::sync::Arc;
use std::time::Instant;

use super::retry::{self, Backoff};
use super::shadow::Shadow;
use super::stop::Abort;
use crate::config::{StageBatch, WorkerConfig};
use crate::core::condition::When;
use crate::core::document::Document;
use crate::core::event::Event;
use crate::messenger::Failure;
use crate::plugin::{DocumentOutcome, PluginError, StageInstance, TrapCause};
use crate::telemetry::meters::{Scope, StageMeters};
use crate::telemetry::{RunStats, StageStats};

/// One stage instance of a worker, with its batch settings and metrics.
pub(crate) struct StageSlot {
    pub(crate) name: Arc<str>,
    pub(crate) instance: StageInstance,
    pub(crate) batch: StageBatch,
    /// The documents it runs for (all of them when none).
    when: Option<When>,
    /// Its figures for the run summary, shared with its other instances.
    pub(crate) stats: Arc<StageStats>,
    meters: StageMeters,
    /// A new version run beside it on a sample of documents.
    pub(crate) shadow: Option<Shadow>,
    /// The labels of its pipeline's metrics.
    scope: Scope,
}

impl StageSlot {
    pub(crate) fn new(
        scope: &Scope,
        name: &str,
        instance: StageInstance,
        batch: StageBatch,
        when: Option<When>,
    ) -> Self {
        Self {
            name: Arc::from(name),
            meters: StageMeters::new(
                scope,
                name,
                if instance.is_batch() {
                    "process-batch"
                } else {
                    "process-document"
                },
            ),
            stats: Arc::default(),
            instance,
            batch,
            when,
            shadow: None,
            scope: scope.clone(),
        }
    }

    pub(crate) fn with_shadow(mut self, shadow: Option<Shadow>) -> Self {
        self.shadow = shadow;
        self
    }

    /// What cancels its calls, and its shadow's.
    pub(crate) fn cancellers(&self) -> Vec<crate::plugin::Cancel> {
        let shadow = self.shadow.as_ref().map(|s| s.instance.canceller());
        std::iter::once(self.instance.canceller())
            .chain(shadow)
            .collect()
    }

    /// Stop its instance and its shadow's (each under its own deadline).
    pub(crate) fn stop(&mut self) {
        if let Err(e) = self.instance.stop() {
            tracing::warn!(stage = %self.name, error = %e, "stage stop failed");
        }
        if let Some(shadow) = self.shadow.as_mut()
            && let Err(e) = shadow.instance.stop()
        {
            tracing::warn!(stage = %self.name, error = %e, "the shadow's stop failed");
        }
    }
}

/// How many documents a worker gathers before running its stages, and how
/// long it waits for them: the largest batch any of its batch stages takes,
/// and the shortest wait any of them allows. With no batch stage, one
/// document at a time, as a document stage is called anyway.
pub(crate) fn gathering(stages: &[StageSlot]) -> StageBatch {
    let batching = stages.iter().filter(|s| s.instance.is_batch());
    StageBatch {
        size: batching.clone().map(|s| s.batch.size).max().unwrap_or(1),
        wait: batching.map(|s| s.batch.wait).min().unwrap_or_default(),
    }
}

/// Why a worker stops processing a batch before its end.
pub(crate) enum Halt {
    /// A fatal plugin error: the run must stop. Every document of the batch
    /// has its outcome (those the error kept from their stages fail, saying
    /// so), so the batch is committed and sent.
    Fatal(String),
    /// The run is stopping and cut a stage call short: nothing of the batch
    /// is sent or committed (it stays pending, or is redelivered).
    Abandoned,
}

/// What became of one document (or one of its children).
pub(crate) enum Outcome {
    Created(Event),
    Index(Document),
    /// Dropped, by the stage named (none: it came dropped).
    Dropped(Document, Option<Arc<str>>),
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

/// A document in flight, and what became of it so far.
struct Node {
    doc: Option<Document>,
    /// The id of the published document it descends from (its own, for
    /// one of the batch): what its children's CREATE events name.
    root: Arc<str>,
    /// Its children, each announced and then all that became of it, in the
    /// order they were made.
    entries: Vec<Entry>,
    end: Option<Outcome>,
    /// The stage that dropped it, once one has.
    dropped_by: Option<Arc<str>>,
}

enum Entry {
    Created(Event),
    Child(usize),
}

impl Node {
    /// A document of the batch: its own root.
    fn top(doc: Document) -> Self {
        let root = Arc::from(doc.id());
        Self::new(doc, root)
    }

    fn new(doc: Document, root: Arc<str>) -> Self {
        Self {
            doc: Some(doc),
            root,
            entries: Vec::new(),
            end: None,
            dropped_by: None,
        }
    }

    /// The document went through every stage it was due (or was dropped).
    fn finish(&mut self) {
        let doc = self.doc.take().expect("a document in flight");
        self.end = Some(if doc.is_dropped() {
            Outcome::Dropped(doc, self.dropped_by.take())
        } else {
            Outcome::Index(doc)
        });
    }
}

/// A worker's stages, with what it needs to retry a call.
pub(crate) struct Stages<'a> {
    pub(crate) stages: &'a mut [StageSlot],
    pub(crate) retry: StageRetry,
    pub(crate) abort: &'a Abort,
    /// The taps documents are offered to as they leave each stage.
    pub(crate) taps: &'a crate::telemetry::tap::Taps,
}

impl Stages<'_> {
    /// Run `docs` through every stage, appending what became of each and of
    /// the children they made to `out`, in order. Returns why it halted, if
    /// it did.
    pub(crate) fn run(&mut self, docs: Vec<Document>, out: &mut Vec<Outcome>) -> Option<Halt> {
        let mut nodes: Vec<Node> = docs.into_iter().map(Node::top).collect();
        let tops = nodes.len();
        let mut active: Vec<usize> = (0..tops).collect();
        let mut fatal = None;
        for i in 0..self.stages.len() {
            // Dropped documents, those that skip the rest, and deletion
            // markers (straight to the indexer, in their place) are done.
            let mut due = Vec::with_capacity(active.len());
            for n in active {
                let doc = nodes[n].doc.as_ref().expect("in flight");
                if doc.is_dropped()
                    || doc.skips_stages()
                    || doc.is_deleted()
                    || crate::core::sync::is_sweep(doc)
                {
                    nodes[n].finish();
                } else {
                    due.push(n);
                }
            }
            active = due;
            if active.is_empty() {
                break;
            }
            // Those the stage's condition leaves out pass it, in their place.
            let called: Vec<bool> = match &self.stages[i].when {
                Some(when) => active
                    .iter()
                    .map(|&n| when.holds(nodes[n].doc.as_ref().expect("in flight")))
                    .collect(),
                None => vec![true; active.len()],
            };
            let skipped = called.iter().filter(|&&c| !c).count() as u64;
            if skipped > 0 {
                self.stages[i].meters.skipped.increment(skipped);
                RunStats::add(&self.stages[i].stats.skipped, skipped);
            }
            let mut docs: Vec<Document> = active
                .iter()
                .zip(&called)
                .filter(|(_, c)| **c)
                .map(|(&n, _)| nodes[n].doc.take().expect("in flight"))
                .collect();
            let results = self.call(i, &mut docs);
            let mut next = Vec::with_capacity(active.len());
            let mut results = docs.into_iter().zip(results);
            for (&n, called) in active.iter().zip(called) {
                if !called {
                    next.push(n);
                    continue;
                }
                let (doc, (result, attempts)) = results.next().expect("a result per call");
                match result {
                    Ok(children) => {
                        self.stages[i]
                            .meters
                            .created
                            .increment(children.len() as u64);
                        for mut child in children {
                            crate::core::sync::inherit(&doc, &mut child);
                            let c = nodes.len();
                            let root = Arc::clone(&nodes[n].root);
                            let created =
                                Event::created(&child, &root).with_stage(&self.stages[i].name);
                            nodes[n].entries.push(Entry::Created(created));
                            nodes[n].entries.push(Entry::Child(c));
                            nodes.push(Node::new(child, root));
                            next.push(c);
                        }
                        if doc.is_dropped() && nodes[n].dropped_by.is_none() {
                            nodes[n].dropped_by = Some(Arc::clone(&self.stages[i].name));
                        }
                        nodes[n].doc = Some(doc);
                        next.push(n);
                    }
                    Err(PluginError::Trap {
                        cause: TrapCause::Cancelled,
                        ..
                    }) if self.abort.is_set() => return Some(Halt::Abandoned),
                    Err(e) => {
                        if !e.is_document_error() && fatal.is_none() {
                            fatal = Some(e.to_string());
                        }
                        let mut message = e.to_string();
                        if attempts > 1 {
                            message
                                .push_str(&format!(" (after {})", retry::attempts_text(attempts)));
                        }
                        let failure = Failure {
                            plugin: self.stages[i].name.to_string(),
                            message,
                            attempts,
                            reason: Some(e.said()),
                        };
                        nodes[n].end = Some(Outcome::Failed(doc, failure));
                    }
                }
            }
            if self.taps.any() {
                let stage = &self.stages[i];
                for &n in &next {
                    if let Some(doc) = nodes[n].doc.as_ref().filter(|d| !d.is_dropped()) {
                        self.taps
                            .offer(stage.scope.pipeline(), Some(&stage.name), doc);
                    }
                }
            }
            active = next;
            if let Some(reason) = &fatal {
                if i + 1 == self.stages.len() {
                    break;
                }
                // The run stops: what the error keeps from the later stages
                // fails, saying why, so nothing is left without an outcome.
                for &n in &active {
                    let doc = nodes[n].doc.take().expect("in flight");
                    let message = format!(
                        "not processed: the run stopped when a stage failed on another document of its batch: {reason}"
                    );
                    let failure = Failure {
                        plugin: self.stages[i].name.to_string(),
                        reason: Some(crate::core::failure::Reason {
                            error: "stopped".into(),
                            message: message.clone(),
                        }),
                        message,
                        attempts: 0,
                    };
                    nodes[n].end = Some(Outcome::Failed(doc, failure));
                }
                active.clear();
                break;
            }
        }
        for n in active {
            nodes[n].finish();
        }
        for top in 0..tops {
            lay_out(&mut nodes, top, out);
        }
        fatal.map(Halt::Fatal)
    }

    /// Stage `i` on `docs`, in chunks of its batch size; each document's
    /// outcome and how many calls it took.
    fn call(&mut self, i: usize, docs: &mut [Document]) -> Vec<(DocumentOutcome, u32)> {
        let stage = &self.stages[i];
        let size = if stage.instance.is_batch() {
            stage.batch.size.max(1)
        } else {
            docs.len().max(1)
        };
        // The documents the shadow runs on, as the live stage gets them.
        let copies: Option<Vec<Option<Document>>> =
            stage.shadow.as_ref().filter(|s| !s.broken).map(|s| {
                docs.iter()
                    .map(|d| s.sample.holds(d.id()).then(|| d.clone()))
                    .collect()
            });
        let mut results = Vec::with_capacity(docs.len());
        for chunk in docs.chunks_mut(size) {
            let stage = &mut self.stages[i];
            let restarts_before = stage.instance.restarts();
            let start = Instant::now();
            let first = match stage.instance.process_batch(chunk) {
                Ok(outcomes) => outcomes,
                Err(e) => {
                    let cancelled = matches!(
                        e,
                        PluginError::Trap {
                            cause: TrapCause::Cancelled,
                            ..
                        }
                    );
                    if !cancelled {
                        tracing::debug!(stage = %stage.name, error = %e, documents = chunk.len(), "a batch call failed; calling again one document at a time");
                    }
                    // Each document by itself, from where it was before the
                    // call (the first call of each then counts as its first).
                    chunk
                        .iter_mut()
                        .map(|doc| {
                            if cancelled {
                                Err(PluginError::Trap {
                                    plugin: stage.name.to_string(),
                                    cause: TrapCause::Cancelled,
                                })
                            } else {
                                stage.instance.process(doc)
                            }
                        })
                        .collect()
                }
            };
            for (doc, outcome) in chunk.iter_mut().zip(first) {
                results.push(self.retried(i, doc, outcome));
            }
            let stage = &mut self.stages[i];
            let elapsed = start.elapsed();
            stage.meters.call_seconds.record(elapsed);
            RunStats::add_time(&stage.stats.nanos, elapsed);
            RunStats::add(&stage.stats.documents, chunk.len() as u64);
            let restarts = stage.instance.restarts() - restarts_before;
            if restarts > 0 {
                stage.meters.restarts.increment(restarts);
            }
        }
        if let Some(copies) = copies {
            let stage = &mut self.stages[i];
            if let Some(shadow) = stage.shadow.as_mut() {
                let held: Vec<bool> = copies.iter().map(Option::is_some).collect();
                let sampled: Vec<Document> = copies.into_iter().flatten().collect();
                let live = held
                    .iter()
                    .zip(docs.iter().zip(&results))
                    .filter(|(held, _)| **held)
                    .map(|(_, (doc, (result, _)))| (result, doc));
                shadow.compare_all(&stage.scope, &stage.name, size, sampled, live);
            }
        }
        let stage = &self.stages[i];
        for (result, attempts) in &results {
            if *attempts > 1 {
                stage.meters.retries.increment(u64::from(attempts - 1));
                RunStats::add(&stage.stats.retries, u64::from(attempts - 1));
            }
            match result {
                Ok(children) => RunStats::add(&stage.stats.children, children.len() as u64),
                Err(_) => RunStats::add(&stage.stats.failed, 1),
            }
        }
        results
    }

    /// `first`, the outcome of stage `i`'s first call on `doc`, or of the
    /// calls made again with backoff while it fails in a way the retry
    /// policy retries; with how many calls it took.
    fn retried(
        &mut self,
        i: usize,
        doc: &mut Document,
        first: DocumentOutcome,
    ) -> (DocumentOutcome, u32) {
        let stage = &mut self.stages[i];
        let mut attempts = 1;
        let mut result = first;
        loop {
            match &result {
                Err(e) if self.retry.again(e, attempts) => {
                    tracing::debug!(doc_id = %crate::core::text::for_log(doc.id()), stage = %stage.name, attempts, error = %e, "retrying a stage call");
                    let delay = self.retry.backoff.delay(attempts);
                    if !retry::pause(delay, || self.abort.is_set()) {
                        return (result, attempts);
                    }
                    attempts += 1;
                    result = stage.instance.process(doc);
                }
                _ => return (result, attempts),
            }
        }
    }
}

/// Append what became of node `n` to `out`: its children in order, each
/// announced and then laid out in turn, then its own end.
fn lay_out(nodes: &mut [Node], n: usize, out: &mut Vec<Outcome>) {
    for entry in std::mem::take(&mut nodes[n].entries) {
        match entry {
            Entry::Created(event) => out.push(Outcome::Created(event)),
            Entry::Child(c) => lay_out(nodes, c, out),
        }
    }
    if let Some(end) = nodes[n].end.take() {
        out.push(end);
    }
}

/// One worker's stage instances for `pipeline`, every one started.
pub(crate) fn start_stages(
    plugins: &super::LoadedPlugins,
    config: &crate::config::Config,
    scope: &Scope,
) -> Result<Vec<StageSlot>, String> {
    let pipeline: &str = scope.pipeline();
    let stage = |name: &str| {
        config
            .pipelines
            .iter()
            .filter(|p| p.name == pipeline)
            .flat_map(|p| &p.stages)
            .find(|s| s.name == name)
    };
    plugins
        .pipelines
        .get(pipeline)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|p| {
            let config = stage(p.name());
            let batch = config.map(|s| s.batch).unwrap_or_default();
            // Checked at validation; a problem here is one it let through.
            let when = match config.and_then(|s| s.when.as_ref()) {
                Some(when) => Some(when.compile().map_err(|problems| {
                    format!(
                        "stage `{}` has a condition in error: {problems:?}",
                        p.name()
                    )
                })?),
                None => None,
            };
            let shadow = plugins
                .shadows
                .get(&(pipeline.to_string(), p.name().to_owned()))
                .map(|s| s.start())
                .transpose()
                .map_err(|e| format!("the shadow of stage `{}` could not start: {e}", p.name()))?;
            p.instantiate()
                .map(|i| StageSlot::new(scope, p.name(), i, batch, when).with_shadow(shadow))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("error starting workers for pipeline `{pipeline}`: {e}"))
}
