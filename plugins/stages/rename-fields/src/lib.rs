//! rename-fields: rename fields.
//!
//! ```toml
//! config = { mappings = [{ source = "name", target = "title" }], mode = "overwrite" }
//! ```

use weir_plugin::{
    ConfigIssue, Document, FieldMapping, Mode, PluginError, Stage, doc_error, issue,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    mappings: Vec<FieldMapping>,
    /// What to do when the target already exists.
    #[serde(default)]
    mode: Mode,
}

struct RenameFields(Config);

impl Stage for RenameFields {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.mappings.is_empty() {
            return vec![issue(
                "mappings",
                "needs at least one { source, target } pair",
            )];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        for m in &self.0.mappings {
            doc.rename(&m.source, &m.target, self.0.mode.into())
                .map_err(doc_error)?;
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(RenameFields);
