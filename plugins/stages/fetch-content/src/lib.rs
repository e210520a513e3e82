//! fetch-content: read the file or URL a document points at into a field.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use base64::Engine;
use config::{Config, Encoding};
use weir_plugin::content::{self, From};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

struct FetchContent(Config);

impl BatchStage for FetchContent {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = content::check_max_mib(config.max_mib);
        if matches!(config.from, From::Field | From::Base64) {
            issues.push(issue(
                "from",
                "must be `file` or `url`: the stage fetches what a field points at",
            ));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.fetch(doc)))
    }
}

impl FetchContent {
    fn fetch(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.0;
        let max = usize::try_from(c.max_mib << 20).unwrap_or(usize::MAX);
        let Some(content) = content::read(doc, c.from, &c.source, max)? else {
            return Ok(());
        };
        let mut changes = Vec::new();
        match c.encoding {
            Encoding::Text => {
                let (text, charset) =
                    content::decode_text(&content.bytes, content.content_type.as_deref(), None);
                changes.push(FieldChange::set_string(c.target.as_str(), text));
                if let Some(field) = &c.charset_field {
                    changes.push(FieldChange::set_string(field.as_str(), charset));
                }
            }
            Encoding::Base64 => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(&content.bytes);
                changes.push(FieldChange::set_string(c.target.as_str(), encoded));
            }
        }
        if let (Some(field), Some(media)) = (&c.content_type_field, &content.content_type) {
            changes.push(FieldChange::set_string(field.as_str(), media.as_str()));
        }
        if let Some(field) = &c.length_field {
            changes.push(FieldChange::set_json(
                field.as_str(),
                content.bytes.len().to_string(),
            ));
        }
        doc.update(&changes).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(FetchContent);
