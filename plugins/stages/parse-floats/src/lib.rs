//! parse-floats: turn text holding numbers into a list of numbers (a
//! vector from a CSV cell or a JSON string, say).
//!
//! ```toml
//! config = { fields = ["embedding"] }
//! config = { mappings = [{ source = "vector_text", target = "vector" }], delimiter = ";" }
//! ```
//!
//! Each text value, `[1.5, 2, -3e-2]` (a JSON array) or `1.5,2,-3e-2`
//! (split on `delimiter`, a comma by default; surrounding whitespace
//! ignored), becomes a list of numbers; a number stays as it is. A value
//! that is not a list of finite numbers fails its document, naming it. At
//! most `max_values` (default 65,536) numbers a value.

use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldMapping, Outcome, PluginError, field_pairs, issue,
    map_values,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fields: Vec<String>,
    #[serde(default)]
    mappings: Vec<FieldMapping>,
    #[serde(default = "Config::delimiter")]
    delimiter: String,
    #[serde(default = "Config::max_values")]
    max_values: usize,
}

impl Config {
    fn delimiter() -> String {
        ",".into()
    }
    fn max_values() -> usize {
        65_536
    }
}

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
