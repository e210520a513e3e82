//! fetch-content: read the bytes a document points at, a file in a granted
//! folder or an HTTP(S) URL, into a field: as text (decoded from its
//! character set) or as base64 (for binary files, PDF or Office, that a
//! later stage extracts).
//!
//! ```toml
//! config = { from = "file", source = "path", target = "content", encoding = "text", max_mib = 20 }
//! config = { from = "url", source = "url", target = "bytes", encoding = "base64" }   # grants.http
//! ```
//!
//! Also writes, when set: `content_type_field` (the server's media type),
//! `length_field` (bytes read) and `charset_field` (the character set text
//! was read in). A file that is missing or past `max_mib` (default 20)
//! fails its document; a server that cannot be reached or answers 429 or
//! 5xx fails it transiently (retried as the worker's policy says).

use base64::Engine;
use weir_plugin::content::{self, From};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

#[derive(serde::Deserialize, Clone, Copy, Default, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    #[default]
    Text,
    Base64,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "Config::file")]
    from: From,
    source: String,
    #[serde(default = "Config::content")]
    target: String,
    #[serde(default)]
    encoding: Encoding,
    #[serde(default = "Config::max_mib")]
    max_mib: u64,
    content_type_field: Option<String>,
    length_field: Option<String>,
    charset_field: Option<String>,
}

impl Config {
    fn file() -> From {
        From::File
    }
    fn content() -> String {
        "content".into()
    }
    fn max_mib() -> u64 {
        20
    }
}

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
