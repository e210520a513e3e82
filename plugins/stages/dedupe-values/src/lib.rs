//! dedupe-values: remove repeated values from multi-valued fields, keeping the first of each in its place.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::collections::HashSet;

use config::Config;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, field_pairs, update_batch,
};

struct DedupeValues {
    pairs: Vec<(String, String)>,
    sources: Vec<String>,
    ignore_case: bool,
}

impl BatchStage for DedupeValues {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        let sources = pairs.iter().map(|(s, _)| s.clone()).collect();
        Ok(Self {
            pairs,
            sources,
            ignore_case: config.ignore_case,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(update_batch(docs, &self.sources, |_, answers| {
            let mut changes = Vec::new();
            for ((source, target), json) in self.pairs.iter().zip(answers) {
                let Some(json) = json else { continue };
                let items = match serde_json::from_str::<Json>(&json) {
                    Ok(Json::Array(items)) => items,
                    Ok(one) if source != target => vec![one],
                    Ok(_) => continue,
                    Err(e) => {
                        return (
                            changes,
                            Err(PluginError::Document(format!("`{source}`: {e}"))),
                        );
                    }
                };
                let before = items.len();
                let mut seen = HashSet::new();
                let kept: Vec<Json> = items
                    .into_iter()
                    .filter(|v| {
                        seen.insert(match v {
                            Json::String(s) if self.ignore_case => {
                                Json::String(s.to_lowercase()).to_string()
                            }
                            other => other.to_string(),
                        })
                    })
                    .collect();
                if kept.len() != before || source != target {
                    changes.push(FieldChange::set_json(
                        target.as_str(),
                        Json::Array(kept).to_string(),
                    ));
                }
            }
            (changes, Ok(()))
        }))
    }
}

weir_plugin::export_batch_stage!(DedupeValues);
