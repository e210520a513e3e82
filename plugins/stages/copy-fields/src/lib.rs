//! copy-fields: copy the values of fields to other fields.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Mode, Outcome, PluginError, doc_error, issue,
    per_document, update, update_batch,
};

struct CopyFields {
    config: Config,
    sources: Vec<String>,
    targets: Vec<String>,
    /// Whether a mapping reads a field an earlier one writes, so that the
    /// sources cannot all be read before anything is written.
    chained: bool,
    /// What the batch reads of each document: the sources, then (to skip
    /// those present) the targets.
    reads: Vec<String>,
}

impl BatchStage for CopyFields {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.mappings.is_empty() {
            issues.push(issue(
                "mappings",
                "needs at least one { source, target } pair",
            ));
        }
        for (i, m) in config.mappings.iter().enumerate() {
            if m.source == m.target {
                issues.push(issue(
                    format!("mappings[{i}]"),
                    "source and target are the same field",
                ));
            }
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let sources: Vec<String> = config.mappings.iter().map(|m| m.source.clone()).collect();
        let targets: Vec<String> = config.mappings.iter().map(|m| m.target.clone()).collect();
        let chained = sources
            .iter()
            .enumerate()
            .any(|(i, source)| targets[..i].contains(source));
        let mut reads = sources.clone();
        if config.mode == Mode::Skip {
            reads.extend(targets.iter().cloned());
        }
        Ok(Self {
            config,
            sources,
            targets,
            chained,
            reads,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        if self.chained {
            return Ok(per_document(docs, |doc| self.copy_one_by_one(doc)));
        }
        if self.config.mode == Mode::Append {
            return Ok(per_document(docs, |doc| self.copy(doc)));
        }
        Ok(update_batch(docs, &self.reads, |doc, answers| {
            self.copies(answers)
                .map_or_else(|| (Vec::new(), self.copy(doc)), |changes| (changes, Ok(())))
        }))
    }
}

impl CopyFields {
    /// The changes that copy each source's JSON as it is (the batch's way,
    /// for `overwrite` and `skip`), from the answers to [`Self::reads`]; none
    /// when a source is multi-valued or null, which [`Self::copy`] copies
    /// value by value.
    fn copies(&self, answers: Vec<Option<String>>) -> Option<Vec<FieldChange>> {
        let (sources, present) = answers.split_at(self.sources.len());
        let mut written: Vec<&str> = Vec::new();
        let mut changes = Vec::new();
        for (i, json) in sources.iter().enumerate() {
            let Some(json) = json else {
                continue;
            };
            if json.starts_with('[') || json == "null" {
                return None;
            }
            let target = self.targets[i].as_str();
            // `present` is empty unless the mode is `skip`.
            let skip = present.get(i).is_some_and(Option::is_some) || written.contains(&target);
            if !(self.config.mode == Mode::Skip && skip) {
                changes.push(FieldChange::set_json(target, json.as_str()));
            }
            written.push(target);
        }
        Some(changes)
    }

    /// Every mapping, reading all sources in one call and writing all
    /// targets in another.
    fn copy(&self, doc: &Document) -> Result<(), PluginError> {
        let mode = self.config.mode;
        // Which targets exist matters only to `skip`; a target written by
        // an earlier mapping exists too.
        let existed: Vec<bool> = match mode {
            Mode::Skip => doc
                .get_json_many(&self.targets)
                .iter()
                .map(Option::is_some)
                .collect(),
            _ => vec![false; self.targets.len()],
        };
        let mut written: Vec<&str> = Vec::new();
        let mut changes = Vec::new();
        for (i, values) in doc.get_all_many(&self.sources).into_iter().enumerate() {
            if values.is_empty() {
                continue;
            }
            let target = self.targets[i].as_str();
            let exists = existed[i] || written.contains(&target);
            changes.extend(mode.changes(target, values, exists));
            written.push(target);
        }
        doc.update(&changes).map_err(doc_error)
    }

    /// Every mapping in turn, for mappings that read what earlier ones wrote.
    fn copy_one_by_one(&self, doc: &Document) -> Result<(), PluginError> {
        for m in &self.config.mappings {
            let values = doc.get_all(&m.source);
            if !values.is_empty() {
                update(doc, &m.target, values, self.config.mode).map_err(doc_error)?;
            }
        }
        Ok(())
    }
}

weir_plugin::export_batch_stage!(CopyFields);
