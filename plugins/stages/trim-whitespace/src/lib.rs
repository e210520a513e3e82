//! trim-whitespace: trim leading and trailing whitespace from text values.
//!
//! ```toml
//! config = { fields = ["title", "body"] }   # empty or absent: every field
//! ```

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
            let values = doc.get_all(&name);
            let needs_trim = values
                .iter()
                .any(|v| matches!(v, Value::Text(t) if t.trim().len() != t.len()));
            if !needs_trim {
                continue;
            }
            let trimmed: Vec<Value> = values
                .into_iter()
                .map(|v| match v {
                    Value::Text(t) => Value::Text(t.trim().to_owned()),
                    other => other,
                })
                .collect();
            if !doc.is_multi_valued(&name) && trimmed.len() == 1 {
                doc.set(&name, &trimmed[0]).map_err(doc_error)?;
            } else {
                doc.set_all(&name, &trimmed).map_err(doc_error)?;
            }
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(TrimWhitespace);
