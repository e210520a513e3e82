//! drop-document: drop documents so they are not indexed.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{BatchStage, ConfigIssue, Document, Outcome, PluginError, issue};

struct DropDocument(Config);

impl BatchStage for DropDocument {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.field.is_none() && !config.values.is_empty() {
            return vec![issue(
                "values",
                "needs `field` to say which field to compare",
            )];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(docs
            .iter()
            .map(|doc| {
                if self.drops(doc) {
                    doc.set_dropped(true);
                }
                Outcome::done()
            })
            .collect())
    }
}

impl DropDocument {
    fn drops(&self, doc: &Document) -> bool {
        match &self.0.field {
            None => true,
            Some(field) if self.0.values.is_empty() => doc.has(field),
            Some(field) => doc
                .get_strings(field)
                .iter()
                .any(|v| self.0.values.contains(v)),
        }
    }
}

weir_plugin::export_batch_stage!(DropDocument);
