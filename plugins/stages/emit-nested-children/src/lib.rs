//! emit-nested-children: turn each object of an array field into a child
//! document, processed by the rest of the pipeline ahead of its parent.
//!
//! ```toml
//! config = { source = "chapters", id_field = "chapter_id", parent_field = "book_id" }
//! ```
//! A child's id is the element's `id_field` value when set and present, else
//! `<parent id>-<index>`. With `parent_field`, the child records its parent's
//! id there. The source field is removed from the parent unless `keep_source`.

use weir_plugin::serde_json::Value as Json;
use weir_plugin::{Document, PluginError, Stage, Value, doc_error};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    source: String,
    id_field: Option<String>,
    parent_field: Option<String>,
    #[serde(default)]
    keep_source: bool,
}

struct EmitNestedChildren(Config);

impl Stage for EmitNestedChildren {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        let c = &self.0;
        let parent_id = doc.id();
        let mut children = Vec::new();
        for (index, value) in doc.get_all(&c.source).into_iter().enumerate() {
            let Json::Object(mut fields) = value.to_json() else {
                return Err(PluginError::Document(format!(
                    "`{}`[{index}] is not an object, so it cannot become a child document",
                    c.source
                )));
            };
            let id = c
                .id_field
                .as_ref()
                .and_then(|f| fields.get(f))
                .and_then(|v| Value::from_json(v).to_text())
                .unwrap_or_else(|| format!("{parent_id}-{index}"));
            for reserved in ["id", "run_id", "_children"] {
                fields.shift_remove(reserved);
            }
            let child = Document::new(&id);
            for (name, v) in &fields {
                child.set(name, &Value::from_json(v)).map_err(doc_error)?;
            }
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

weir_plugin::export_stage!(EmitNestedChildren);
