//! trim-whitespace: trim leading and trailing whitespace from text values.
//!
//! ```toml
//! config = { fields = ["title", "body"] }   # empty or absent: every field
//! ```

use weir_plugin::serde_json;
use weir_plugin::{Document, PluginError, Stage, Value, doc_error};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fields: Vec<String>,
}

struct TrimWhitespace(Config);

impl Stage for TrimWhitespace {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        let fields = if self.0.fields.is_empty() {
            doc.field_names()
        } else {
            self.0.fields.clone()
        };
        for name in fields {
            // One call tells a single text value (the usual case) from the rest.
            let Some(json) = doc.get_json(&name) else {
                continue;
            };
            if json.starts_with('"') {
                let text: String = serde_json::from_str(&json)
                    .map_err(|e| PluginError::Document(format!("`{name}`: {e}")))?;
                let trimmed = text.trim();
                if trimmed.len() != text.len() {
                    doc.set_string(&name, trimmed).map_err(doc_error)?;
                }
                continue;
            }
            // Numbers, booleans, null and objects hold no text to trim.
            if !json.starts_with('[') {
                continue;
            }
            let values = doc.get_all(&name);
            let needs_trim = values
                .iter()
                .any(|v| matches!(v, Value::Text(t) if t.trim().len() != t.len()));
            if needs_trim {
                let trimmed: Vec<Value> = values
                    .into_iter()
                    .map(|v| match v {
                        Value::Text(t) => Value::Text(t.trim().to_owned()),
                        other => other,
                    })
                    .collect();
                doc.set_all(&name, &trimmed).map_err(doc_error)?;
            }
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(TrimWhitespace);
