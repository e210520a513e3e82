//! parse-json: turn text values that hold JSON into the values they hold.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::{Config, OnError};
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, field_pairs, map_values,
};

struct ParseJson {
    pairs: Vec<(String, String)>,
    on_error: OnError,
}

impl BatchStage for ParseJson {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        Ok(Self {
            pairs,
            on_error: config.on_error,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(map_values(docs, &self.pairs, |value| {
            let Json::String(text) = value else {
                return Ok(None);
            };
            match serde_json::from_str::<Json>(text) {
                Ok(parsed) => Ok(Some(parsed)),
                Err(_) if self.on_error == OnError::Keep => Ok(None),
                Err(e) => Err(format!("is not JSON: {e}")),
            }
        }))
    }
}

weir_plugin::export_batch_stage!(ParseJson);
