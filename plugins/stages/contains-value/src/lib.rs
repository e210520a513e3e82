//! contains-value: mark documents whose fields hold any of some values.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::{Config, MAX_VALUES, Match};
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, is_whole_word, issue,
    text_of, update_batch,
};

struct ContainsValue {
    config: Config,
    values: Vec<String>,
}

impl ContainsValue {
    fn holds(&self, text: &str) -> bool {
        let text = if self.config.ignore_case {
            text.to_lowercase()
        } else {
            text.to_owned()
        };
        self.values.iter().any(|v| match self.config.how {
            Match::Whole => text == *v,
            Match::Substring => text.contains(v.as_str()),
            Match::Word => text
                .match_indices(v.as_str())
                .any(|(at, found)| is_whole_word(&text, at, at + found.len())),
        })
    }
}

impl BatchStage for ContainsValue {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.fields.is_empty() {
            issues.push(issue("fields", "needs at least one field"));
        }
        if config.values.is_empty() || config.values.len() > MAX_VALUES {
            issues.push(issue("values", format!("needs 1 to {MAX_VALUES} values")));
        }
        if config.values.iter().any(String::is_empty) {
            issues.push(issue(
                "values",
                "an empty value matches everything: leave it out",
            ));
        }
        if config.target.is_empty() {
            issues.push(issue("target", "must name a field"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let values = config
            .values
            .iter()
            .map(|v| {
                if config.ignore_case {
                    v.to_lowercase()
                } else {
                    v.clone()
                }
            })
            .collect();
        Ok(Self { config, values })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let names = self.config.fields.clone();
        Ok(update_batch(docs, &names, |_, answers| {
            let mut found = false;
            for json in answers.iter().flatten() {
                let Ok(value) = serde_json::from_str::<Json>(json) else {
                    continue;
                };
                let values = match &value {
                    Json::Array(items) => items.iter().collect(),
                    one => vec![one],
                };
                if values
                    .into_iter()
                    .filter_map(text_of)
                    .any(|t| self.holds(&t))
                {
                    found = true;
                    break;
                }
            }
            let c = &self.config;
            let written = if found {
                Some(&c.value)
            } else {
                c.otherwise.as_ref()
            };
            let changes = written
                .map(|v| vec![FieldChange::set_json(c.target.as_str(), v.to_string())])
                .unwrap_or_default();
            (changes, Ok(()))
        }))
    }
}

weir_plugin::export_batch_stage!(ContainsValue);
