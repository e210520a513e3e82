//! split-field-values: split text values on a delimiter into several values.
//!
//! ```toml
//! config = { source = "tags", target = "tag_list", delimiter = ",", trim = true }
//! ```
//! `target` defaults to `source`. Empty pieces are dropped.
//!
//! A batch stage: one call per batch, two per document (read, write).

use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, Value, doc_error, issue, per_document,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    source: String,
    target: Option<String>,
    delimiter: String,
    #[serde(default = "yes")]
    trim: bool,
}

fn yes() -> bool {
    true
}

struct SplitFieldValues(Config);

impl BatchStage for SplitFieldValues {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.delimiter.is_empty() {
            return vec![issue("delimiter", "must not be empty")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.split(doc)))
    }
}

impl SplitFieldValues {
    fn split(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.0;
        let values = doc.get_strings(&c.source);
        if values.is_empty() {
            return Ok(());
        }
        let pieces: Vec<Value> = values
            .iter()
            .flat_map(|v| v.split(c.delimiter.as_str()))
            .map(|p| if c.trim { p.trim() } else { p })
            .filter(|p| !p.is_empty())
            .map(|p| Value::Text(p.to_owned()))
            .collect();
        let target = c.target.as_deref().unwrap_or(&c.source);
        doc.set_all(target, &pieces).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(SplitFieldValues);
