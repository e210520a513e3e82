//! trim-whitespace: trim leading and trailing whitespace from text values.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, Change, Document, FieldChange, Outcome, PluginError, Value, doc_error,
    per_document, update_batch,
};

struct TrimWhitespace(Config);

impl BatchStage for TrimWhitespace {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let names = &self.0.fields;
        if names.is_empty() {
            // Every field: the names differ from one document to the next.
            return Ok(per_document(docs, trim_every_field));
        }
        Ok(update_batch(docs, names, |_, answers| {
            trims(names, answers)
        }))
    }
}

fn trim_every_field(doc: &Document) -> Result<(), PluginError> {
    let names = doc.field_names();
    let (changes, end) = trims(&names, doc.get_json_many(&names));
    doc.update(&changes).map_err(doc_error)?;
    end
}

/// The changes that trim `names`, whose values are `answers` (JSON text).
/// A field that cannot be read ends the document with an error; the fields
/// before it are trimmed, as when each field was written on its own.
fn trims(
    names: &[String],
    answers: Vec<Option<String>>,
) -> (Vec<FieldChange>, Result<(), PluginError>) {
    let mut changes = Vec::new();
    for (name, json) in names.iter().zip(answers) {
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
                return (
                    changes,
                    Err(PluginError::Document(format!("`{name}`: {e}"))),
                );
            }
        }
    }
    (changes, Ok(()))
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
