//! emit-nested-children: turn each object of an array field into a child document.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{BatchStage, Document, Outcome, PluginError, Value, doc_error, per_document};

struct EmitNestedChildren(Config);

impl BatchStage for EmitNestedChildren {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.children(doc)))
    }
}

impl EmitNestedChildren {
    fn children(&self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        let c = &self.0;
        let parent_id = doc.id();
        let mut children = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for (index, value) in doc.get_all(&c.source).into_iter().enumerate() {
            let Json::Object(fields) = value.to_json() else {
                return Err(PluginError::Document(format!(
                    "`{}`[{index}] is not an object, so it cannot become a child document",
                    c.source
                )));
            };
            // Only a text or a number names a child; an empty text does not.
            let id = c
                .id_field
                .as_ref()
                .and_then(|f| fields.get(f))
                .filter(|v| v.is_string() || v.is_number())
                .and_then(|v| Value::from_json(v).to_text())
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("{parent_id}-{index}"));
            if !ids.insert(id.clone()) {
                return Err(PluginError::Document(format!(
                    "`{}`[{index}]: another child already has the id `{id}`",
                    c.source
                )));
            }
            // The element's `id`, `run_id` and `_children` are left out.
            let child = Document::from_json_with_id(&id, &Json::Object(fields).to_string())
                .map_err(doc_error)?;
            if let Some(parent_field) = &c.parent_field {
                child
                    .set_string(parent_field, &parent_id)
                    .map_err(doc_error)?;
            }
            children.push(child);
        }
        if !c.keep_source && !children.is_empty() {
            doc.remove(&c.source).map_err(doc_error)?;
        }
        Ok(children)
    }
}

weir_plugin::export_batch_stage!(EmitNestedChildren);
