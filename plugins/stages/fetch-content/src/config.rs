//! fetch-content's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::content::From;

/// Read the bytes a document points at, a file in a granted folder or an
/// HTTP(S) URL, into a field: as text (decoded from its character set) or as
/// base64 (for binary files, PDF or Office, that a later stage extracts).
///
/// The path or URL is the first value of `source`; a document without it
/// (absent or null) is left as it is. Text is read in its character set (a
/// byte-order mark, valid UTF-8, the server's `charset`, else a guess).
/// Also writes, when set: `content_type_field` (the server's media type),
/// `length_field` (bytes read) and `charset_field` (the character set text
/// was read in). A file that is missing or cannot be read, content past
/// `max_mib`, and a URL answering another error fail the document; a server
/// that cannot be reached or answers 429 or 5xx fails it transiently
/// (retried as the worker's policy says). A URL's host must be in the
/// plugin's `grants.http`, a file's folder granted to it.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What `source` holds: `file` (a path) or `url`; `field` and `base64`
    /// are refused, as there is nothing to fetch.
    #[serde(default = "Config::file")]
    pub from: From,
    /// The field holding the path or URL.
    pub source: String,
    /// The field that gets the content.
    #[serde(default = "Config::content")]
    pub target: String,
    /// How the content is written to `target`.
    #[serde(default)]
    pub encoding: Encoding,
    /// Largest content read, in MiB (1..1024); larger fails the document.
    #[serde(default = "Config::max_mib")]
    pub max_mib: u64,
    /// A field that gets the media type the server gave (none for a file).
    pub content_type_field: Option<String>,
    /// A field that gets how many bytes were read.
    pub length_field: Option<String>,
    /// A field that gets the character set the text was read in (with
    /// `encoding = "text"` only).
    pub charset_field: Option<String>,
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

/// How fetched content is written.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// As text, decoded from its character set.
    #[default]
    Text,
    /// As base64 of its bytes, for binary files a later stage extracts.
    Base64,
}
