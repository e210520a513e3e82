//! set-static-values: set fields to fixed values.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Mode, Outcome, PluginError, Value, doc_error,
    issue, per_document,
};

struct SetStaticValues {
    /// The fields, in order, each with the changes that write it.
    fields: Vec<(String, Vec<FieldChange>)>,
    /// Every field's changes, in order: what a document gets unless `skip`
    /// leaves out the fields it has.
    all: Vec<FieldChange>,
    names: Vec<String>,
    mode: Mode,
}

impl BatchStage for SetStaticValues {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.values.is_empty() {
            return vec![issue("values", "needs at least one field")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let fields: Vec<(String, Vec<FieldChange>)> = config
            .values
            .iter()
            .map(|(name, v)| {
                let values = match v {
                    Json::Array(items) => items.iter().map(Value::from_json).collect(),
                    single => vec![Value::from_json(single)],
                };
                (name.clone(), config.mode.changes(name, values, false))
            })
            .collect();
        Ok(Self {
            all: fields.iter().flat_map(|(_, c)| c.iter().cloned()).collect(),
            names: fields.iter().map(|(name, _)| name.clone()).collect(),
            fields,
            mode: config.mode,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.set(doc)))
    }
}

impl SetStaticValues {
    fn set(&self, doc: &Document) -> Result<(), PluginError> {
        if self.mode != Mode::Skip {
            return doc.update(&self.all).map_err(doc_error);
        }
        let absent: Vec<FieldChange> = doc
            .get_json_many(&self.names)
            .iter()
            .zip(&self.fields)
            .filter(|(existing, _)| existing.is_none())
            .flat_map(|(_, (_, changes))| changes.iter().cloned())
            .collect();
        doc.update(&absent).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(SetStaticValues);
