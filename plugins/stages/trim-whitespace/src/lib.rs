//! trim-whitespace: trim leading and trailing whitespace from text values.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use std::borrow::Cow;
use weir_plugin::serde_json::{self, Value as Json};

use weir_plugin::{Changes, Document, FieldChange, FieldStage, Lent, PluginError, doc_error};

struct TrimWhitespace(Config);

impl FieldStage for TrimWhitespace {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn reads(&self) -> &[String] {
        &self.0.fields
    }

    fn plan(
        &mut self,
        fields: &[Option<&str>],
        doc: &Lent<'_>,
        changes: &mut Changes<'_>,
    ) -> Result<(), PluginError> {
        if self.0.fields.is_empty() {
            // Every field: the names differ from one document to the next.
            return trim_every_field(doc.document());
        }
        trims(&self.0.fields, fields, |name, trimmed| match trimmed {
            Trimmed::Text(text) => changes.set_text(name, &text),
            Trimmed::Json(json) => changes.set_json(name, &json),
        })
    }
}

fn trim_every_field(doc: &Document) -> Result<(), PluginError> {
    let names = doc.field_names();
    let answers = doc.get_json_many(&names);
    let answers: Vec<Option<&str>> = answers.iter().map(Option::as_deref).collect();
    let mut changes = Vec::new();
    let end = trims(&names, &answers, |name, trimmed| {
        changes.push(match trimmed {
            Trimmed::Text(text) => FieldChange::set_string(name, text),
            Trimmed::Json(json) => FieldChange::set_json(name, json),
        });
    });
    doc.update(&changes).map_err(doc_error)?;
    end
}

/// A field's value trimmed.
enum Trimmed<'j> {
    /// A single text value.
    Text(Cow<'j, str>),
    /// Several values, as JSON text.
    Json(String),
}

/// Trim `names`, whose values are `answers` (JSON text), handing each
/// field that changes to `trim`. A field that cannot be read ends the
/// document with an error; the fields before it are trimmed, as when each
/// field was written on its own.
fn trims<'j>(
    names: &'j [String],
    answers: &[Option<&'j str>],
    mut trim: impl FnMut(&'j str, Trimmed<'j>),
) -> Result<(), PluginError> {
    for (name, json) in names.iter().zip(answers) {
        let Some(json) = json else {
            continue;
        };
        match trimmed(json) {
            Ok(Some(value)) => trim(name, value),
            Ok(None) => {}
            Err(e) => return Err(PluginError::Document(format!("`{name}`: {e}"))),
        }
    }
    Ok(())
}

/// A field whose whole value is `json`, trimmed, or none when it holds no
/// text to trim (numbers, booleans, null and objects never do).
fn trimmed(json: &str) -> Result<Option<Trimmed<'_>>, serde_json::Error> {
    // A single text value, the usual case: trimmed as it is when it holds
    // no escape (its JSON text between the quotes is then the text itself:
    // whitespace JSON escapes, such as tabs, never occurs there), else once
    // decoded.
    if let Some(raw) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
        && !raw.contains('\\')
    {
        let trimmed = raw.trim();
        return Ok((trimmed.len() != raw.len()).then_some(Trimmed::Text(Cow::Borrowed(trimmed))));
    }
    if json.starts_with('"') {
        let text: String = serde_json::from_str(json)?;
        let trimmed = text.trim();
        return Ok((trimmed.len() != text.len()).then(|| Trimmed::Text(Cow::Owned(trimmed.into()))));
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
    Ok(changed.then(|| Trimmed::Json(Json::Array(items).to_string())))
}

weir_plugin::export_field_stage!(TrimWhitespace);
