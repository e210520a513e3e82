//! split-field-values: split text values on a delimiter into several values.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{
    Changes, ConfigIssue, Document, FieldStage, Lent, PluginError, Value, doc_error, issue,
    serde_json,
};

struct SplitFieldValues {
    config: Config,
    /// `[source]`, what the batch reads.
    reads: Vec<String>,
}

impl FieldStage for SplitFieldValues {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.delimiter.is_empty() {
            return vec![issue("delimiter", "must not be empty")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let reads = vec![config.source.clone()];
        Ok(Self { config, reads })
    }

    fn reads(&self) -> &[String] {
        &self.reads
    }

    fn plan(
        &mut self,
        fields: &[Option<&str>],
        doc: &Lent<'_>,
        changes: &mut Changes<'_>,
    ) -> Result<(), PluginError> {
        let Some(json) = fields.first().copied().flatten() else {
            return Ok(());
        };
        // One text value, the usual case: split as it is when it holds no
        // escape (its JSON text between the quotes is then the text
        // itself), else once decoded. Anything else (several values,
        // numbers) is read as text value by value.
        if let Some(raw) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
            && !raw.contains('\\')
        {
            changes.set_texts(self.target(), self.pieces(raw));
            return Ok(());
        }
        match serde_json::from_str::<String>(json) {
            Ok(text) => {
                let pieces: Vec<String> = self.pieces(&text).map(str::to_owned).collect();
                changes.set_texts(self.target(), pieces.iter().map(String::as_str));
                Ok(())
            }
            Err(_) => self.split(doc.document()),
        }
    }
}

impl SplitFieldValues {
    fn split(&self, doc: &Document) -> Result<(), PluginError> {
        let values = doc.get_strings(&self.config.source);
        if values.is_empty() {
            return Ok(());
        }
        let pieces: Vec<Value> = values
            .iter()
            .flat_map(|v| self.pieces(v))
            .map(|p| Value::Text(p.to_owned()))
            .collect();
        doc.set_all(self.target(), &pieces).map_err(doc_error)
    }

    /// `value` split on the delimiter, trimmed if asked, empty pieces dropped.
    fn pieces<'v>(&self, value: &'v str) -> impl Iterator<Item = &'v str> {
        let c = &self.config;
        value
            .split(c.delimiter.as_str())
            .map(|p| if c.trim { p.trim() } else { p })
            .filter(|p| !p.is_empty())
    }

    fn target(&self) -> &str {
        self.config.target.as_deref().unwrap_or(&self.config.source)
    }
}

weir_plugin::export_field_stage!(SplitFieldValues);
