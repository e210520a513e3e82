//! field-length: write how long a field is to another field.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::{Config, Of};
use unicode_segmentation::UnicodeSegmentation;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, issue, text_of,
    update_batch,
};

struct FieldLength {
    config: Config,
    sources: Vec<String>,
}

impl BatchStage for FieldLength {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.mappings.is_empty() {
            return vec![issue("mappings", "needs at least one { source, target }")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let sources = config.mappings.iter().map(|m| m.source.clone()).collect();
        Ok(Self { config, sources })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let c = &self.config;
        Ok(update_batch(docs, &self.sources, |_, answers| {
            let mut changes = Vec::new();
            for (m, json) in c.mappings.iter().zip(answers) {
                let length = match json {
                    None if c.skip_absent => continue,
                    None => 0,
                    Some(json) => match serde_json::from_str::<Json>(&json) {
                        Ok(value) => length(&value, c.of),
                        Err(e) => {
                            let error = PluginError::Document(format!("`{}`: {e}", m.source));
                            return (changes, Err(error));
                        }
                    },
                };
                changes.push(FieldChange::set_json(m.target.as_str(), length.to_string()));
            }
            (changes, Ok(()))
        }))
    }
}

fn length(value: &Json, of: Of) -> usize {
    let values: Vec<&Json> = match value {
        Json::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    if let Of::Values = of {
        return values.len();
    }
    values
        .into_iter()
        .filter_map(text_of)
        .map(|t| match of {
            Of::Bytes => t.len(),
            Of::Words => t.unicode_words().count(),
            _ => t.chars().count(),
        })
        .sum()
}

weir_plugin::export_batch_stage!(FieldLength);
