//! `weir replay`: dead letters sent through their pipelines again, each
//! pipeline's as one source of a new run.

use std::time::Duration;

use super::Source;
use super::dead_letters::DeadLetter;
use crate::config::{Config, ConnectorConfig};
use crate::core::document::Document;
use crate::plugin::{Cancel, PluginSpec, PublishSink};

/// One source per pipeline the letters name (or all into `pipeline`), in
/// the order pipelines first appear, each named `replay:<pipeline>`.
pub(super) fn sources(
    config: &Config,
    letters: Vec<DeadLetter>,
    pipeline: Option<&str>,
) -> Result<Vec<(ConnectorConfig, Source)>, String> {
    let mut groups: Vec<(String, Vec<Document>)> = Vec::new();
    for letter in letters {
        let target = pipeline.unwrap_or(&letter.pipeline).to_owned();
        if config.pipeline(&target).is_none() {
            return Err(format!(
                "dead letter `{}` is for pipeline `{target}`, which this config does not have (--pipeline sends every letter through one it has)",
                letter.id
            ));
        }
        let doc = Document::from_json(letter.document)
            .map_err(|e| format!("dead letter `{}` does not hold a document: {e}", letter.id))?;
        match groups.iter_mut().find(|(name, _)| *name == target) {
            Some((_, docs)) => docs.push(doc),
            None => groups.push((target, vec![doc])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(pipeline, docs)| {
            let connector = ConnectorConfig {
                name: format!("replay:{pipeline}"),
                plugin: PluginSpec::new("(dead letters)", serde_json::json!({})),
                pipeline,
                continuous: false,
            };
            (connector, Source::Documents(docs))
        })
        .collect())
}

/// Publish `docs` as documents of run `run_id`, waiting for room at most
/// `timeout` in all, stopping when `cancel` says so.
pub(super) fn publish(
    docs: Vec<Document>,
    run_id: &str,
    mut sink: Box<dyn PublishSink>,
    timeout: Duration,
    cancel: &Cancel,
) -> Result<(), String> {
    let deadline = crate::core::time::deadline_after(timeout);
    for mut doc in docs {
        if cancel.is_cancelled() {
            return Err("the replay was stopped".into());
        }
        // Documents of this run now: its accounting counts them.
        doc.set_run_id(Some(run_id.to_owned()));
        sink.publish(doc, deadline)
            .map_err(|e| format!("publishing a replayed document failed: {e}"))?;
    }
    Ok(())
}
