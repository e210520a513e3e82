//! rename-fields: rename fields.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, doc_error, issue, per_document,
};

struct RenameFields(Config);

impl BatchStage for RenameFields {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.mappings.is_empty() {
            return vec![issue(
                "mappings",
                "needs at least one { source, target } pair",
            )];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| {
            self.0.mappings.iter().try_for_each(|m| {
                doc.rename(&m.source, &m.target, self.0.mode.into())
                    .map(drop)
                    .map_err(doc_error)
            })
        }))
    }
}

weir_plugin::export_batch_stage!(RenameFields);
