//! The conformance stage in Rust: one operation per config (see
//! `plugins/conformance/README.md`).

use weir_plugin::serde_json::Value as Json;
use weir_plugin::{Document, PluginError, Stage, UpdateMode, Value, doc_error};

#[derive(serde::Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum Op {
    Copy { from: String, to: String },
    Rename { from: String, to: String },
    Split { field: String, separator: String },
    Children { field: String },
    Drop { field: String, equals: String },
    Fail,
}

struct Conformance(Op);

fn is_true(doc: &Document, name: &str) -> bool {
    matches!(doc.get(name), Some(Value::Boolean(true)))
}

impl Stage for Conformance {
    type Config = Op;

    fn start(op: Op) -> Result<Self, String> {
        Ok(Self(op))
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        match &self.0 {
            Op::Copy { from, to } => {
                if doc.has(from) {
                    let values = doc.get_all(from);
                    if doc.is_multi_valued(from) {
                        doc.set_all(to, &values).map_err(doc_error)?;
                    } else if let Some(value) = values.first() {
                        doc.set(to, value).map_err(doc_error)?;
                    }
                }
            }
            Op::Rename { from, to } => {
                doc.rename(from, to, UpdateMode::Overwrite)
                    .map_err(doc_error)?;
            }
            Op::Split { field, separator } => {
                if let Some(text) = doc.get_string(field) {
                    let pieces: Vec<Value> = text
                        .split(separator.as_str())
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| Value::Text(p.to_owned()))
                        .collect();
                    doc.set_all(field, &pieces).map_err(doc_error)?;
                }
            }
            Op::Children { field } => {
                let mut children = Vec::new();
                for (position, value) in doc.get_all(field).iter().enumerate() {
                    let Json::Object(mut fields) = value.to_json() else {
                        continue;
                    };
                    fields.insert("parent_id".into(), Json::String(doc.id()));
                    let child = Document::from_json_with_id(
                        &format!("{}-{position}", doc.id()),
                        &Json::Object(fields).to_string(),
                    )
                    .map_err(doc_error)?;
                    children.push(child);
                }
                doc.remove(field).map_err(doc_error)?;
                return Ok(children);
            }
            Op::Drop { field, equals } => {
                if doc.get_string(field).as_deref() == Some(equals.as_str()) {
                    doc.set_dropped(true);
                }
            }
            Op::Fail => {
                if is_true(doc, "transient") {
                    return Err(PluginError::Transient(format!(
                        "service unavailable for {}",
                        doc.id()
                    )));
                }
                if is_true(doc, "fail") {
                    return Err(PluginError::Document(format!(
                        "cannot process {}",
                        doc.id()
                    )));
                }
            }
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(Conformance);
