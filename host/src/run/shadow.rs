//! Shadow stages: a new version of a stage run beside the live one on a
//! sample of documents. The shadow gets a copy of each sampled document as
//! the live stage got it; what it makes of it is compared with what the
//! live stage made (the document field by field, its children, a drop or
//! a failure) and thrown away. Differences are counted in metrics
//! (`weir_shadow_documents_total`), written to the shadow's report file or
//! logged, bounded per line and in all (`shadow_report.rs`); nothing of the
//! shadow reaches the index, and a shadow that fails, traps or stops fails
//! nothing but its own comparison.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

pub(crate) use super::shadow_report::ShadowReport;
use super::shadow_report::difference_line;

use crate::config::ShadowConfig;
use crate::core::document::Document;
use crate::core::sample::id_hash;
use crate::plugin::{DocumentOutcome, StageInstance};
use crate::telemetry::meters::Scope;

/// Which documents a shadow runs on.
#[derive(Debug)]
pub(crate) struct Sample {
    /// Documents whose id hashes below this, of `u64::MAX`.
    below: u64,
    ids: HashSet<String>,
}

impl Sample {
    pub(crate) fn new(config: &ShadowConfig) -> Self {
        let share = config.share();
        Self {
            below: if share >= 1.0 {
                u64::MAX
            } else {
                (share * u64::MAX as f64) as u64
            },
            ids: config.ids.iter().cloned().collect(),
        }
    }

    /// Whether `id` is sampled: the same answer in every process (a hash
    /// with fixed keys).
    pub(crate) fn holds(&self, id: &str) -> bool {
        if self.below == u64::MAX || self.ids.contains(id) {
            return true;
        }
        if self.below == 0 {
            return false;
        }
        id_hash(id) < self.below
    }
}

/// A shadow's figures, said once its last worker is done with it.
impl Drop for LoadedShadow {
    fn drop(&mut self) {
        let compared = self.report.compared.load(Ordering::Relaxed);
        if compared > 0 {
            let differing = self.report.differing.load(Ordering::Relaxed);
            let report = self.report.path.as_ref().map(|p| p.display().to_string());
            tracing::info!(
                shadow = %self.plugin.name(),
                compared,
                differing,
                report = report.as_deref().unwrap_or("(logged)"),
                "shadow stage: documents compared with the live stage"
            );
        }
    }
}

/// A stage's shadow in one worker.
pub(crate) struct Shadow {
    pub(crate) instance: StageInstance,
    pub(crate) sample: Arc<Sample>,
    pub(crate) report: Arc<ShadowReport>,
    /// It stopped working (a fatal error): it runs no more in this worker.
    pub(crate) broken: bool,
}

impl Shadow {
    /// Run the shadow on `sampled` (documents as the live stage got them,
    /// in calls of up to `size`, as the live stage is called) and compare
    /// each with the live stage's outcome and document in `live`.
    pub(crate) fn compare_all<'a>(
        &mut self,
        scope: &Scope,
        stage: &str,
        size: usize,
        mut sampled: Vec<Document>,
        live: impl Iterator<Item = (&'a DocumentOutcome, &'a Document)>,
    ) {
        let mut outcomes = Vec::with_capacity(sampled.len());
        for chunk in sampled.chunks_mut(size.max(1)) {
            if self.broken {
                break;
            }
            match self.instance.process_batch(chunk) {
                Ok(each) => outcomes.extend(each),
                // The call failed as a whole: each by itself, as the live
                // stage's documents go.
                Err(_) => outcomes.extend(chunk.iter_mut().map(|doc| self.instance.process(doc))),
            }
            if let Some(Err(e)) = outcomes
                .iter()
                .find(|o| o.as_ref().is_err_and(|e| !e.is_document_error()))
            {
                tracing::warn!(stage, error = %e, "the shadow stopped working: it runs no more in this worker");
                self.broken = true;
            }
        }
        for ((before, outcome), live) in sampled.iter().zip(&outcomes).zip(live) {
            self.judge(scope, stage, before, outcome, live);
        }
    }

    /// Compare the shadow's `outcome` on `before` with the live stage's.
    fn judge(
        &self,
        scope: &Scope,
        stage: &str,
        before: &Document,
        outcome: &DocumentOutcome,
        live: (&DocumentOutcome, &Document),
    ) {
        if same_quickly(outcome, before, live) {
            self.report.compared.fetch_add(1, Ordering::Relaxed);
            scope.shadowed(stage, "same");
            return;
        }
        let live = output(live.0, live.1);
        let shadow = output(outcome, before);
        let differences = crate::testing::field_differences("", &live, &shadow);
        self.report.compared.fetch_add(1, Ordering::Relaxed);
        if differences.is_empty() {
            scope.shadowed(stage, "same");
            return;
        }
        scope.shadowed(
            stage,
            if outcome.is_err() {
                "failed"
            } else {
                "differs"
            },
        );
        let line = difference_line(scope.pipeline().as_ref(), stage, before.id(), &differences);
        self.report.differs(stage, &line);
    }
}

/// Whether both versions made the same document of it and nothing else
/// (the common case), without turning either into JSON.
fn same_quickly(
    outcome: &DocumentOutcome,
    doc: &Document,
    live: (&DocumentOutcome, &Document),
) -> bool {
    matches!((outcome, live.0), (Ok(a), Ok(b)) if a.is_empty() && b.is_empty())
        && doc.id() == live.1.id()
        && doc.is_dropped() == live.1.is_dropped()
        && doc.fields() == live.1.fields()
}

/// What a stage made of a document, as one JSON value to compare: the
/// document (or that it was dropped), its children, or its failure.
fn output(outcome: &DocumentOutcome, doc: &Document) -> Value {
    match outcome {
        Ok(children) => {
            let mut out = json!({ "document": if doc.is_dropped() { json!("dropped") } else { doc.to_json() } });
            if !children.is_empty() {
                out["children"] = Value::Object(
                    children
                        .iter()
                        .map(|c| (c.id().to_owned(), c.to_json()))
                        .collect(),
                );
            }
            out
        }
        Err(e) => json!({ "failed": failure_text(e) }),
    }
}

/// A failure as both versions would give it: the plugin's own message, or
/// what stopped it (not the error's text, which names the plugin).
fn failure_text(error: &crate::plugin::PluginError) -> String {
    use crate::plugin::PluginError;
    match error {
        PluginError::Document { message, .. } => message.clone(),
        PluginError::Trap { cause, .. } => cause.to_string(),
        other => other.kind().to_owned(),
    }
}

/// A stage's shadow as validation loaded it: the plugin, and what every
/// worker's instance of it shares.
#[derive(Debug)]
pub(crate) struct LoadedShadow {
    pub(crate) plugin: crate::plugin::StagePlugin,
    sample: Arc<Sample>,
    report: Arc<ShadowReport>,
}

impl LoadedShadow {
    pub(crate) fn new(plugin: crate::plugin::StagePlugin, config: &ShadowConfig) -> Self {
        Self {
            plugin,
            sample: Arc::new(Sample::new(config)),
            report: Arc::new(ShadowReport::new(config)),
        }
    }

    /// An instance for one worker.
    pub(crate) fn start(&self) -> Result<Shadow, crate::plugin::PluginError> {
        Ok(Shadow {
            instance: self.plugin.instantiate()?,
            sample: Arc::clone(&self.sample),
            report: Arc::clone(&self.report),
            broken: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::PluginError;

    fn doc(title: &str) -> Document {
        let mut doc = Document::new("d-1");
        doc.set("title", json!(title)).expect("set");
        doc
    }

    /// The quick comparison says `same` only where the full one finds no
    /// difference.
    #[test]
    fn the_quick_comparison_agrees_with_the_full_one() {
        let failed = || -> DocumentOutcome {
            Err(PluginError::Document {
                plugin: "p".into(),
                message: "no".into(),
                transient: false,
            })
        };
        let mut dropped = doc("a");
        dropped.set_dropped(true);
        let cases: Vec<(DocumentOutcome, Document, DocumentOutcome, Document)> = vec![
            (Ok(vec![]), doc("a"), Ok(vec![]), doc("a")),
            (Ok(vec![]), doc("a"), Ok(vec![]), doc("b")),
            (Ok(vec![]), doc("a"), Ok(vec![]), dropped),
            (Ok(vec![doc("c")]), doc("a"), Ok(vec![]), doc("a")),
            (failed(), doc("a"), Ok(vec![]), doc("a")),
            (failed(), doc("a"), failed(), doc("a")),
            (Ok(vec![]), Document::new("d-1"), Ok(vec![]), doc("a")),
        ];
        for (i, (outcome, shadow, live_outcome, live)) in cases.iter().enumerate() {
            let full = crate::testing::field_differences(
                "",
                &output(live_outcome, live),
                &output(outcome, shadow),
            )
            .is_empty();
            let quick = same_quickly(outcome, shadow, (live_outcome, live));
            assert!(!quick || full, "case {i}: quick says same, full differs");
            if i == 0 {
                assert!(quick, "equal documents are same quickly");
            }
        }
    }
}
