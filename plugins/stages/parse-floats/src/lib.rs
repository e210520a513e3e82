//! parse-floats: turn text holding numbers into a list of numbers.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, field_pairs, issue, map_values,
};

struct ParseFloats {
    config: Config,
    pairs: Vec<(String, String)>,
}

fn number(text: &str) -> Result<Json, String> {
    let trimmed = text.trim();
    trimmed
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .and_then(serde_json::Number::from_f64)
        .map(Json::Number)
        .ok_or_else(|| {
            format!(
                "`{}` is not a finite number",
                trimmed.chars().take(40).collect::<String>()
            )
        })
}

impl ParseFloats {
    fn parse(&self, value: &Json) -> Result<Option<Json>, String> {
        let Json::String(text) = value else {
            return Ok(None);
        };
        let trimmed = text.trim();
        let numbers: Vec<Json> = if trimmed.starts_with('[') {
            let parsed: Vec<Json> = serde_json::from_str(trimmed)
                .map_err(|e| format!("not a JSON list of numbers: {e}"))?;
            parsed
                .iter()
                .map(|v| match v {
                    Json::Number(n) => number(&n.to_string()),
                    other => Err(format!("{other} is not a number")),
                })
                .collect::<Result<_, _>>()?
        } else if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed
                .split(self.config.delimiter.as_str())
                .map(number)
                .collect::<Result<_, _>>()?
        };
        if numbers.len() > self.config.max_values {
            return Err(format!(
                "holds {} numbers, more than max_values ({})",
                numbers.len(),
                self.config.max_values
            ));
        }
        Ok(Some(Json::Array(numbers)))
    }
}

impl BatchStage for ParseFloats {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default();
        if config.delimiter.is_empty() {
            issues.push(issue("delimiter", "must not be empty"));
        }
        if config.max_values == 0 {
            issues.push(issue("max_values", "must be at least 1"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        Ok(Self { config, pairs })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let pairs = self.pairs.clone();
        Ok(map_values(docs, &pairs, |v| self.parse(v)))
    }
}

weir_plugin::export_batch_stage!(ParseFloats);
