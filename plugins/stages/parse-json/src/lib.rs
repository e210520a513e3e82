//! parse-json: turn text values that hold JSON into the values they hold.
//!
//! ```toml
//! config = { fields = ["payload"], on_error = "fail" }
//! ```
//!
//! `"{\"a\":1}"` becomes the object `{"a": 1}`; numbers keep their digits
//! (`2.50` stays `2.50`; an exponent is written in serde_json's form, `1e400`
//! as `1e+400`, the same number).
//! With `on_error = "keep"` text that is not JSON is left as it is; `fail`
//! (default) fails the document, naming the field and where the JSON
//! breaks. The host bounds what the result may grow a document to
//! (`limits.max_document_mib`, `limits.max_depth`). `mappings = [{ source,
//! target }]` writes the parsed values to another field.

use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldMapping, Outcome, PluginError, field_pairs, map_values,
};

#[derive(serde::Deserialize, Clone, Copy, Default, PartialEq)]
#[serde(rename_all = "lowercase")]
enum OnError {
    #[default]
    Fail,
    Keep,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fields: Vec<String>,
    #[serde(default)]
    mappings: Vec<FieldMapping>,
    #[serde(default)]
    on_error: OnError,
}

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
