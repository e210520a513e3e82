//! trim-whitespace: trim leading and trailing whitespace from text values.
//!
//! ```toml
//! config = { fields = ["title", "body"] }   # empty or absent: every field
//! ```
//!
//! A batch stage: per document, one call reads every field it trims as JSON
//! and one writes those that changed (none when nothing needed trimming).

use std::borrow::Cow;

use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, Change, Document, FieldChange, Outcome, PluginError, Value, doc_error, per_document,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fields: Vec<String>,
}

struct TrimWhitespace(Config);

impl BatchStage for TrimWhitespace {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.trim(doc)))
    }
}

impl TrimWhitespace {
    fn trim(&self, doc: &Document) -> Result<(), PluginError> {
        let names = if self.0.fields.is_empty() {
            Cow::Owned(doc.field_names())
        } else {
            Cow::Borrowed(&self.0.fields)
        };
        let mut changes = Vec::new();
        let mut unreadable = None;
        for (name, json) in names.iter().zip(doc.get_json_many(&names)) {
            let Some(json) = json else {
                continue;
            };
            match trimmed(&json) {
                Ok(Some(change)) => changes.push(FieldChange {
                    name: name.clone(),
                    change,
                }),
                Ok(None) => {}
                Err(e) => {
                    unreadable = Some(PluginError::Document(format!("`{name}`: {e}")));
                    break;
                }
            }
        }
        // The fields before one that cannot be read are trimmed, as when
        // each field was written on its own.
        doc.update(&changes).map_err(doc_error)?;
        unreadable.map_or(Ok(()), Err)
    }
}

/// The change that trims a field whose whole value is `json`, or none when
/// it holds no text to trim (numbers, booleans, null and objects never do).
fn trimmed(json: &str) -> Result<Option<Change>, serde_json::Error> {
    // A single text value, the usual case.
    if json.starts_with('"') {
        let text: String = serde_json::from_str(json)?;
        let trimmed = text.trim();
        return Ok((trimmed.len() != text.len()).then(|| Change::Set(Value::Text(trimmed.into()))));
    }
    if !json.starts_with('[') {
        return Ok(None);
    }
    // A multi-valued field: its text values trimmed, the rest as they are
    // (numbers keep their text, objects their key order).
    let Json::Array(mut items) = serde_json::from_str(json)? else {
        return Ok(None);
    };
    let mut changed = false;
    for item in &mut items {
        if let Json::String(text) = item {
            let trimmed = text.trim();
            if trimmed.len() != text.len() {
                *text = trimmed.to_owned();
                changed = true;
            }
        }
    }
    Ok(changed.then(|| Change::SetJson(Json::Array(items).to_string())))
}

weir_plugin::export_batch_stage!(TrimWhitespace);
