//! copy-fields: copy the values of fields to other fields.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{
    Changes, ConfigIssue, Document, FieldStage, Lent, Mode, PluginError, doc_error, issue, update,
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

impl FieldStage for CopyFields {
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

    fn reads(&self) -> &[String] {
        if self.one_by_one() { &[] } else { &self.reads }
    }

    fn plan(
        &mut self,
        fields: &[Option<&str>],
        doc: &Lent<'_>,
        changes: &mut Changes<'_>,
    ) -> Result<(), PluginError> {
        if self.chained {
            return self.copy_one_by_one(doc.document());
        }
        if self.config.mode == Mode::Append {
            return self.copy(doc.document());
        }
        match self.copies(fields) {
            Some(copies) => {
                for (target, json) in copies {
                    changes.set_json(target, json);
                }
                Ok(())
            }
            None => self.copy(doc.document()),
        }
    }
}

impl CopyFields {
    /// Whether each document is copied through its handle, reading none of
    /// its fields packed: mappings that read what earlier ones wrote, and
    /// appending (value by value).
    fn one_by_one(&self) -> bool {
        self.chained || self.config.mode == Mode::Append
    }

    /// The (target, JSON) sets that copy each source's JSON as it is (the
    /// batch's way, for `overwrite` and `skip`), from the answers to
    /// [`Self::reads`]; none when a source is multi-valued or null, which
    /// [`Self::copy`] copies value by value.
    fn copies<'a>(&'a self, answers: &[Option<&'a str>]) -> Option<Vec<(&'a str, &'a str)>> {
        let (sources, present) = answers.split_at(self.sources.len());
        let mut written: Vec<&str> = Vec::new();
        let mut changes = Vec::new();
        for (i, json) in sources.iter().enumerate() {
            let Some(json) = json else {
                continue;
            };
            if json.starts_with('[') || *json == "null" {
                return None;
            }
            let target = self.targets[i].as_str();
            // `present` is empty unless the mode is `skip`.
            let skip = present.get(i).is_some_and(Option::is_some) || written.contains(&target);
            if !(self.config.mode == Mode::Skip && skip) {
                changes.push((target, *json));
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

weir_plugin::export_field_stage!(CopyFields);
