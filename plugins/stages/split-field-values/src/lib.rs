//! split-field-values: split text values on a delimiter into several values.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, Value, doc_error, issue,
    serde_json, update_batch,
};

struct SplitFieldValues {
    config: Config,
    /// `[source]`, what the batch reads.
    reads: Vec<String>,
}

impl BatchStage for SplitFieldValues {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.delimiter.is_empty() {
            return vec![issue("delimiter", "must not be empty")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let reads = vec![config.source.clone()];
        Ok(Self { config, reads })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(update_batch(docs, &self.reads, |doc, mut answers| {
            let Some(json) = answers.pop().flatten() else {
                return (Vec::new(), Ok(()));
            };
            // One text value, the usual case; anything else (several
            // values, numbers) is read as text value by value.
            match serde_json::from_str::<String>(&json) {
                Ok(text) => {
                    let pieces = self.pieces(std::slice::from_ref(&text));
                    (vec![FieldChange::set_all(self.target(), pieces)], Ok(()))
                }
                Err(_) => (Vec::new(), self.split(doc)),
            }
        }))
    }
}

impl SplitFieldValues {
    fn split(&self, doc: &Document) -> Result<(), PluginError> {
        let values = doc.get_strings(&self.config.source);
        if values.is_empty() {
            return Ok(());
        }
        doc.set_all(self.target(), &self.pieces(&values))
            .map_err(doc_error)
    }

    /// `values` split on the delimiter, trimmed if asked, empty pieces dropped.
    fn pieces(&self, values: &[String]) -> Vec<Value> {
        let c = &self.config;
        values
            .iter()
            .flat_map(|v| v.split(c.delimiter.as_str()))
            .map(|p| if c.trim { p.trim() } else { p })
            .filter(|p| !p.is_empty())
            .map(|p| Value::Text(p.to_owned()))
            .collect()
    }

    fn target(&self) -> &str {
        self.config.target.as_deref().unwrap_or(&self.config.source)
    }
}

weir_plugin::export_batch_stage!(SplitFieldValues);
