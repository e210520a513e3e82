//! A pipeline's stages on given documents, for pipeline tests
//! (`weir test`, in `testing/pipeline.rs`): the same stage instances, conditions,
//! batching and retries as a worker, with what became of each document
//! written as transcript lines instead of sent on.

use serde_json::{Value, json};

use super::stages::start_stages;
use super::stages::{Outcome, StageRetry, Stages};
use super::stop::Abort;
use super::{LoadedPlugins, Runner};
use crate::core::document::Document;

/// Where documents enter a pipeline and where what they became is read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Span<'a> {
    /// They enter before this stage (default: the first, as published).
    pub before: Option<&'a str>,
    /// What they are after this stage (default: the last, at the indexer).
    pub after: Option<&'a str>,
}

impl Runner {
    /// Run `docs` through `pipeline`'s stages from `span.before` to
    /// `span.after`, on fresh instances; what became of them as transcript
    /// lines: documents passed on (`{"document": ...}`) and `CREATE`
    /// (with `parent`), `DROP` and `FAIL` (with `stage` and `message`)
    /// events, each child with what became of it ahead of its parent.
    pub fn stages_on(
        &self,
        plugins: &LoadedPlugins,
        pipeline: &str,
        span: Span<'_>,
        docs: Vec<Document>,
    ) -> Result<Vec<Value>, String> {
        let range = stage_range(&self.config, pipeline, span).map_err(|(_, why)| why)?;
        let mut slots = start_stages(plugins, &self.config, &self.scope(pipeline))?;
        let abort = Abort::default();
        let mut outcomes = Vec::new();
        let chosen = if slots.is_empty() {
            &mut slots[..]
        } else {
            &mut slots[range]
        };
        let halt = Stages {
            stages: chosen,
            retry: StageRetry::new(&self.config.worker),
            abort: &abort,
            taps: &self.taps,
        }
        .run(docs, &mut outcomes);
        for slot in &mut slots {
            slot.stop();
        }
        if let Some(super::stages::Halt::Fatal(reason)) = halt {
            tracing::warn!(%reason, "a stage failed fatally");
        }
        Ok(transcript(outcomes))
    }
}

/// The stages of `pipeline` in `config` that `span` covers, or which of its
/// settings (`pipeline`, `before`, `after`) is wrong and why.
pub fn stage_range(
    config: &crate::config::Config,
    pipeline: &str,
    span: Span<'_>,
) -> Result<std::ops::RangeInclusive<usize>, (&'static str, String)> {
    let names: Vec<&str> = config
        .pipeline(pipeline)
        .ok_or_else(|| {
            let known: Vec<&str> = config.pipelines.iter().map(|p| p.name.as_str()).collect();
            (
                "pipeline",
                format!(
                    "the config has no pipeline `{pipeline}` (it has: {})",
                    known.join(", ")
                ),
            )
        })?
        .stages
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    let at = |setting: &'static str, name: Option<&str>, default: usize| match name {
        None => Ok(default),
        Some(name) => names.iter().position(|n| *n == name).ok_or_else(|| {
            (
                setting,
                format!(
                    "pipeline `{pipeline}` has no stage `{name}` (it has: {})",
                    names.join(", ")
                ),
            )
        }),
    };
    let from = at("before", span.before, 0)?;
    let to = at("after", span.after, names.len().saturating_sub(1))?;
    if !names.is_empty() && to < from {
        return Err((
            "after",
            format!(
                "stage `{}` comes before stage `{}`: nothing runs between them",
                names[to], names[from]
            ),
        ));
    }
    Ok(from..=to)
}

/// Outcomes as transcript lines, each CREATE naming its parent: the
/// document whose end closes the level the CREATE was made in.
fn transcript(outcomes: Vec<Outcome>) -> Vec<Value> {
    let mut lines = Vec::with_capacity(outcomes.len());
    // Per level being laid out: the child it is for (none at the top) and
    // the CREATE lines made at that level, waiting for their parent.
    let mut levels: Vec<(Option<String>, Vec<usize>)> = vec![(None, Vec::new())];
    for outcome in outcomes {
        let id = match outcome {
            Outcome::Created(event) => {
                levels.last_mut().expect("a level").1.push(lines.len());
                lines.push(json!({ "event": "CREATE", "id": event.document_id }));
                levels.push((Some(event.document_id), Vec::new()));
                continue;
            }
            Outcome::Index(doc) => {
                lines.push(json!({ "document": doc.to_json() }));
                doc.id().to_owned()
            }
            Outcome::Dropped(doc, _) => {
                lines.push(json!({ "event": "DROP", "id": doc.id() }));
                doc.id().to_owned()
            }
            Outcome::Failed(doc, failure) => {
                // The plugin test's FAIL line, and the stage it was in.
                let (error, message) = match failure.reason {
                    Some(reason) => (reason.error, reason.message),
                    None => ("document".to_owned(), failure.message),
                };
                lines.push(json!({
                    "event": "FAIL",
                    "id": doc.id(),
                    "stage": failure.plugin,
                    "error": error,
                    "message": message,
                }));
                doc.id().to_owned()
            }
        };
        let waiting = if levels.len() > 1 && levels.last().and_then(|l| l.0.as_deref()) == Some(&id)
        {
            levels.pop().expect("a level").1
        } else {
            std::mem::take(&mut levels[0].1)
        };
        for line in waiting {
            lines[line]["parent"] = json!(id);
        }
    }
    lines
}
