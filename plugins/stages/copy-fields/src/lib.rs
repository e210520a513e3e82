//! copy-fields: copy the values of source fields to target fields.
//!
//! ```toml
//! config = { mappings = [{ source = "title", target = "title_copy" }], mode = "overwrite" }
//! ```
//!
//! A batch stage: per document, one call reads every source and one writes
//! every target (with `mode = "skip"`, one more reads which targets exist).

use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldMapping, Mode, Outcome, PluginError, doc_error, issue,
    per_document, update,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Source -> target pairs, applied in order.
    mappings: Vec<FieldMapping>,
    /// How to write a target that already has values.
    #[serde(default)]
    mode: Mode,
}

struct CopyFields {
    config: Config,
    sources: Vec<String>,
    targets: Vec<String>,
    /// Whether a mapping reads a field an earlier one writes, so that the
    /// sources cannot all be read before anything is written.
    chained: bool,
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
        Ok(Self {
            config,
            sources,
            targets,
            chained,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| {
            if self.chained {
                self.copy_one_by_one(doc)
            } else {
                self.copy(doc)
            }
        }))
    }
}

impl CopyFields {
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
