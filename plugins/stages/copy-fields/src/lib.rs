//! copy-fields: copy the values of source fields to target fields.
//!
//! ```toml
//! config = { mappings = [{ source = "title", target = "title_copy" }], mode = "overwrite" }
//! ```

use weir_plugin::{
    ConfigIssue, Document, FieldMapping, Mode, PluginError, Stage, doc_error, issue, update,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Source -> target pairs, applied in order.
    mappings: Vec<FieldMapping>,
    /// How to write a target that already has values.
    #[serde(default)]
    mode: Mode,
}

struct CopyFields(Config);

impl Stage for CopyFields {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.mappings.is_empty() {
            issues.push(issue(
                "mappings",
                "needs at least one { source, target } pair",
            ));
        }
        for (i, m) in config.mappings.iter().enumerate() {
            if m.source == m.target {
                issues.push(issue(
                    format!("mappings[{i}]"),
                    "source and target are the same field",
                ));
            }
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        for m in &self.0.mappings {
            let values = doc.get_all(&m.source);
            if !values.is_empty() {
                update(doc, &m.target, values, self.0.mode).map_err(doc_error)?;
            }
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(CopyFields);
