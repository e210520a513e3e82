//! Stages: one type for both shapes a stage can have.
//!
//! - A document stage exports `stage-api` (contract 0.2.0 and later): the
//!   host calls `process-document` once per document, lending it borrowed.
//! - A batch stage exports `stage-batch-api` (contract 0.2.1): the host
//!   calls `process-batch` once per batch, lending every document as an owned
//!   handle that stays the host's, and gets one outcome per document back.
//!   One that also exports `stage-lent-api` (0.2.1, world `lent-stage`) is
//!   called with `process-lent` instead: the batch as one handle whose
//!   documents are addressed by position (see `batch_world`), and outcomes only
//!   for the documents that failed or made children.
//!
//! Callers see one call, [`StageInstance::process_batch`]: a document stage
//! is called for each document of the batch in turn (a batch of one each
//! time), so the worker has one code path. A component that exports both
//! interfaces is called through the batch.

use super::batch_world::BatchWorld;
use super::bindings::stage::Stage;
use super::bindings::{BatchOutcome, ConfigIssue, GuestError};
use super::error::PluginError;
use super::instance::{Instance, Lending, Loaded, Prepared};
use super::kinds::{check_config, flatten, guest_error};
use crate::core::document::Document;
use crate::core::limit::Limit;

/// What one document of a stage call became: the children it made (which
/// run through the rest of the pipeline ahead of it), or why it failed.
pub type DocumentOutcome = Result<Vec<Document>, PluginError>;

#[derive(Clone)]
enum Shape {
    Document(Prepared<Stage>),
    Batch(Prepared<BatchWorld>),
}

/// A loaded stage plugin. Clone it into each worker and call
/// [`StagePlugin::instantiate`] there.
#[derive(Clone)]
pub struct StagePlugin {
    shape: Shape,
}

impl std::fmt::Debug for StagePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagePlugin")
            .field("name", &self.name())
            .field("batch", &self.is_batch())
            .finish()
    }
}

impl StagePlugin {
    pub(crate) fn load(loaded: Loaded) -> Result<Self, PluginError> {
        let shape = if loaded.exports("stage-batch-api") {
            Shape::Batch(Prepared::new(loaded)?)
        } else {
            Shape::Document(Prepared::new(loaded)?)
        };
        Ok(Self { shape })
    }

    fn loaded(&self) -> &Loaded {
        match &self.shape {
            Shape::Document(p) => &p.loaded,
            Shape::Batch(p) => &p.loaded,
        }
    }

    /// The name the config gives the plugin.
    pub fn name(&self) -> &str {
        &self.loaded().name
    }

    /// The SHA-256 of the component every instance of it runs (the bytes
    /// read when it was loaded).
    pub fn sha256(&self) -> [u8; 32] {
        self.loaded().sha256
    }

    /// Whether the stage takes batches (it exports `stage-batch-api`).
    pub fn is_batch(&self) -> bool {
        matches!(self.shape, Shape::Batch(_))
    }

    /// Every problem the plugin finds in its config, asked of a throw-away
    /// instance.
    pub fn check_config(&self) -> Result<Vec<ConfigIssue>, PluginError> {
        match &self.shape {
            Shape::Document(p) => check_config(p, async |b, store, config| {
                b.weir_plugin_stage_api()
                    .call_check_config(store, config)
                    .await
            }),
            Shape::Batch(p) => check_config(p, async |b, store, config| {
                b.weir_plugin_stage_batch_api()
                    .call_check_config(store, config)
                    .await
            }),
        }
    }

    /// A started instance for one worker. A `start` failure is returned here,
    /// before any document.
    pub fn instantiate(&self) -> Result<StageInstance, PluginError> {
        let inner = match &self.shape {
            Shape::Document(p) => Live::Document(Instance::start(p.clone(), true)?),
            Shape::Batch(p) => Live::Batch(Instance::start(p.clone(), true)?),
        };
        Ok(StageInstance { inner })
    }
}

enum Live {
    Document(Instance<Stage>),
    Batch(Instance<BatchWorld>),
}

/// One worker's instance of a stage.
pub struct StageInstance {
    inner: Live,
}

impl std::fmt::Debug for StageInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageInstance")
            .field("name", &&*self.loaded().name)
            .field("restarts", &self.restarts())
            .finish()
    }
}

impl StageInstance {
    fn loaded(&self) -> &Loaded {
        match &self.inner {
            Live::Document(i) => i.loaded(),
            Live::Batch(i) => i.loaded(),
        }
    }

    /// Whether the stage takes batches.
    pub fn is_batch(&self) -> bool {
        matches!(self.inner, Live::Batch(_))
    }

    /// Process `doc` in place; returns the children it made, which inherit its
    /// run id. On error `doc` holds whatever the stage did before failing.
    pub fn process(&mut self, doc: &mut Document) -> DocumentOutcome {
        match self.process_batch(std::slice::from_mut(doc)) {
            Ok(mut outcomes) => outcomes.pop().expect("one outcome per document"),
            Err(e) => Err(e),
        }
    }

    /// Process `docs` in place, in order: one outcome per document, in the
    /// order of `docs`; children inherit their parent's run id.
    ///
    /// `Err` means the call itself failed (a trap, the deadline, a cancel)
    /// for a batch of more than one document: no document has an outcome,
    /// and each is back as it was before the call, to be run again by
    /// itself. A failed call on one document is that document's outcome.
    pub fn process_batch(
        &mut self,
        docs: &mut [Document],
    ) -> Result<Vec<DocumentOutcome>, PluginError> {
        match &mut self.inner {
            Live::Document(instance) => Ok(docs
                .iter_mut()
                .map(|doc| {
                    let children = call_document(instance, doc)?;
                    checked(instance.loaded(), instance.log_lines, 1, doc, children)
                })
                .collect()),
            Live::Batch(instance) => {
                let outcomes = match call_batch(instance, docs) {
                    Ok(outcomes) => outcomes,
                    Err(e) if docs.len() > 1 => return Err(e),
                    Err(e) => vec![Err(e)],
                };
                let (loaded, lines) = (instance.loaded(), instance.log_lines);
                Ok(outcomes
                    .into_iter()
                    .zip(docs.iter())
                    .map(|(outcome, doc)| checked(loaded, lines, docs.len(), doc, outcome?))
                    .collect())
            }
        }
    }

    /// A handle that stops this stage's call in progress from another
    /// thread (and its later calls, until reset); the instance is then
    /// discarded.
    pub fn canceller(&self) -> super::Cancel {
        match &self.inner {
            Live::Document(i) => i.canceller(),
            Live::Batch(i) => i.canceller(),
        }
    }

    /// Call the stage's `stop`; an instance that is not live (replaced
    /// after a trap, not yet made again) has nothing to stop.
    pub fn stop(&mut self) -> Result<(), PluginError> {
        let (r, name) = match &mut self.inner {
            Live::Document(i) if i.is_live() => {
                let timeout = i.loaded().spec.limits.call_timeout();
                let r = i.call(timeout, async |b, store| {
                    b.weir_plugin_stage_api().call_stop(store).await
                });
                (r, i.loaded().name.clone())
            }
            Live::Batch(i) if i.is_live() => {
                let timeout = i.loaded().spec.limits.call_timeout();
                let r = i.call(timeout, async |b, store| {
                    b.weir_plugin_stage_batch_api().call_stop(store).await
                });
                (r, i.loaded().name.clone())
            }
            _ => return Ok(()),
        };
        flatten(&name, r)
    }

    /// How many times the instance was replaced after a trap.
    pub fn restarts(&self) -> u64 {
        match &self.inner {
            Live::Document(i) => i.restarts,
            Live::Batch(i) => i.restarts,
        }
    }
}

/// `process-document` on `doc`.
fn call_document(instance: &mut Instance<Stage>, doc: &mut Document) -> DocumentOutcome {
    let timeout = instance.loaded().spec.limits.call_timeout();
    let outcome = instance.call_lending(
        timeout,
        std::slice::from_mut(doc),
        Lending::Borrowed,
        async |b, store, mut lent| {
            let handle = lent.pop().expect("a document is lent");
            let handles = match b
                .weir_plugin_stage_api()
                .call_process_document(&mut *store, handle)
                .await?
            {
                Ok(handles) => handles,
                Err(e) => return Ok(Err(e)),
            };
            let state = store.data_mut();
            let children = handles
                .into_iter()
                .map(|h| state.take_back(h))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Ok(children))
        },
    );
    flatten(&instance.loaded().name, outcome)
}

/// `process-lent` (when the stage exports it) or `process-batch` on `docs`:
/// one outcome per document, or the call's own failure (a trap).
fn call_batch(
    instance: &mut Instance<BatchWorld>,
    docs: &mut [Document],
) -> Result<Vec<DocumentOutcome>, PluginError> {
    let timeout = instance.loaded().spec.limits.call_timeout();
    let by_position = instance.bindings()?.lends();
    let lending = if by_position {
        Lending::ByPosition
    } else {
        Lending::Owned
    };
    let answer = instance.call_lending(timeout, docs, lending, async |b, store, lent| {
        // Each outcome with its position (process-batch's: its place).
        let outcomes: Vec<(u32, BatchOutcome)> = if by_position {
            match b.process_lent(&mut *store).await? {
                Ok(listed) => listed,
                Err(e) => return Ok(Err(e)),
            }
        } else {
            match b
                .weir_plugin_stage_batch_api()
                .call_process_batch(&mut *store, &lent)
                .await?
            {
                Ok(outcomes) => (0..).zip(outcomes).collect(),
                Err(e) => return Ok(Err(e)),
            }
        };
        // Children are taken back whatever the answer, so none stays held.
        let state = store.data_mut();
        let mut taken = Vec::with_capacity(outcomes.len());
        for (at, outcome) in outcomes {
            taken.push((
                at,
                match outcome {
                    BatchOutcome::Done(children) => Ok(children
                        .into_iter()
                        .map(|h| state.take_back(h))
                        .collect::<Result<Vec<_>, _>>()?),
                    BatchOutcome::Failed(e) => Err(e),
                },
            ));
        }
        Ok(Ok(taken))
    })?;
    let name = &instance.loaded().name;
    let count = docs.len();
    let taken = match answer {
        // The whole batch fails with the plugin's error.
        Err(e) => {
            return Ok((0..count)
                .map(|_| Err(guest_error(name, e.clone())))
                .collect());
        }
        Ok(taken) if by_position => placed(taken, count),
        Ok(taken) if taken.len() != count => Err(format!(
            "answered {} outcomes for a batch of {count} documents (process-batch must answer one per document)",
            taken.len(),
        )),
        Ok(taken) => Ok(taken.into_iter().map(|(_, t)| t).collect()),
    };
    Ok(match taken {
        Ok(taken) => taken
            .into_iter()
            .map(|t| t.map_err(|e: GuestError| guest_error(name, e)))
            .collect(),
        Err(message) => (0..count)
            .map(|_| {
                Err(PluginError::Document {
                    plugin: name.to_string(),
                    message: message.clone(),
                    transient: false,
                })
            })
            .collect(),
    })
}

/// What became of one document, as the plugin answered it.
type Taken = Result<Vec<Document>, GuestError>;

/// The outcome of each of `count` documents from what `process-lent`
/// listed (every document it leaves out is done, with no children), or why
/// the answer cannot be trusted: a position past the batch or listed twice.
fn placed(listed: Vec<(u32, Taken)>, count: usize) -> Result<Vec<Taken>, String> {
    let mut outcomes: Vec<Option<Taken>> = (0..count).map(|_| None).collect();
    for (at, outcome) in listed {
        let slot = usize::try_from(at)
            .ok()
            .and_then(|at| outcomes.get_mut(at))
            .ok_or_else(|| {
                format!(
                    "answered an outcome for document {at} of a batch of {count} (process-lent positions start at 0)"
                )
            })?;
        if slot.is_some() {
            return Err(format!(
                "answered two outcomes for document {at} of the batch (process-lent answers each at most once)"
            ));
        }
        *slot = Some(outcome);
    }
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Ok(Vec::new())))
        .collect())
}

/// `children` of `doc` held to the plugin's limits: a log flood or a
/// document grown past its size fails the document. Children inherit the
/// run id of `doc`.
fn checked(
    loaded: &Loaded,
    (written, dropped): (u64, u64),
    batch: usize,
    doc: &Document,
    mut children: Vec<Document>,
) -> DocumentOutcome {
    let limits = &loaded.spec.limits;
    let limit_error = |message: String| PluginError::Document {
        plugin: loaded.name.to_string(),
        message,
        transient: false,
    };
    // A flood: one call wrote more lines than a whole second allows for
    // each of its documents. (Steady logging over the rate only loses
    // lines, with a warning.)
    let per_second = u64::from(limits.log_lines_per_second());
    if written > per_second.saturating_mul(batch as u64) {
        let what = if batch == 1 {
            "one document".to_owned()
        } else {
            format!("a batch of {batch} documents ({per_second} per document)")
        };
        return Err(limit_error(format!(
            "wrote {written} log lines for {what}, more than its limit of {per_second} lines per second ({}); {dropped} lines dropped",
            Limit::LogLinesPerSecond
        )));
    }
    let max_bytes = limits.max_document_bytes();
    for d in std::iter::once(doc).chain(&children) {
        let bytes = d.approx_json_bytes();
        if bytes > max_bytes {
            return Err(limit_error(format!(
                "document `{}` grew to about {bytes} bytes, over the limit of {} MiB ({})",
                d.id(),
                limits.max_document_mib(),
                Limit::MaxDocumentMib
            )));
        }
    }
    // Only the host says which run a document belongs to: its parent's.
    for child in &mut children {
        child.set_run_id(doc.run_id().map(str::to_owned));
    }
    Ok(children)
}
