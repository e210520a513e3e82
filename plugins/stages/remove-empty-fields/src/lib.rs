//! remove-empty-fields: remove fields that hold nothing.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, Document, FieldChange, Outcome, PluginError, doc_error, per_document,
};

struct RemoveEmptyFields(Config);

impl BatchStage for RemoveEmptyFields {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.clean(doc)))
    }
}

impl RemoveEmptyFields {
    fn empty(&self, value: &Json) -> bool {
        match value {
            Json::Null => true,
            Json::String(s) => s.is_empty() || (self.0.blank && s.trim().is_empty()),
            Json::Array(a) => a.is_empty(),
            Json::Object(o) => o.is_empty(),
            _ => false,
        }
    }

    fn clean(&self, doc: &Document) -> Result<(), PluginError> {
        let names = if self.0.fields.is_empty() {
            doc.field_names()
        } else {
            self.0.fields.clone()
        };
        let mut changes = Vec::new();
        for (name, json) in names.iter().zip(doc.get_json_many(&names)) {
            let Some(json) = json else { continue };
            let value: Json = serde_json::from_str(&json)
                .map_err(|e| PluginError::Document(format!("`{name}`: {e}")))?;
            match value {
                Json::Array(items) if !items.is_empty() => {
                    let kept: Vec<Json> =
                        items.iter().filter(|v| !self.empty(v)).cloned().collect();
                    if kept.is_empty() {
                        changes.push(FieldChange::remove(name.as_str()));
                    } else if kept.len() != items.len() {
                        changes.push(FieldChange::set_json(
                            name.as_str(),
                            Json::Array(kept).to_string(),
                        ));
                    }
                }
                v if self.empty(&v) => changes.push(FieldChange::remove(name.as_str())),
                _ => {}
            }
        }
        doc.update(&changes).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(RemoveEmptyFields);
