//! set-static-values: set fields to fixed values.
//!
//! ```toml
//! config = { values = { source = "catalog", version = 2 }, mode = "skip" }
//! ```

use weir_plugin::serde_json::{Map, Value as Json};
use weir_plugin::{
    ConfigIssue, Document, Mode, PluginError, Stage, Value, doc_error, issue, update,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Field name -> value (any JSON; an array sets several values).
    values: Map<String, Json>,
    #[serde(default)]
    mode: Mode,
}

struct SetStaticValues {
    values: Vec<(String, Vec<Value>)>,
    mode: Mode,
}

impl Stage for SetStaticValues {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.values.is_empty() {
            return vec![issue("values", "needs at least one field")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let values = config
            .values
            .iter()
            .map(|(name, v)| {
                let values = match v {
                    Json::Array(items) => items.iter().map(Value::from_json).collect(),
                    single => vec![Value::from_json(single)],
                };
                (name.clone(), values)
            })
            .collect();
        Ok(Self {
            values,
            mode: config.mode,
        })
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        for (name, values) in &self.values {
            update(doc, name, values.clone(), self.mode).map_err(doc_error)?;
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(SetStaticValues);
