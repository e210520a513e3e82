//! decode-base64's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Decode base64 text values to text, or (with `encode`) encode text as base64.
///
/// Each text value is decoded on its own, each value of a multi-valued field
/// too; whitespace inside it (line breaks of wrapped base64) is ignored,
/// `=` padding is optional. The decoded bytes must be UTF-8 text (a document
/// holds text, not bytes). A value that is not base64, or that decodes to
/// bytes that are not UTF-8, fails the document with an error naming the
/// field (the fields written before it keep their change). Values that are
/// not text are left as they are (a `target` gets them unchanged); an absent
/// field is left alone. Two host calls per batch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose values are decoded (or encoded) in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Write the results for `source` to `target` instead (with `fields`, or alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// Which base64 alphabet is read and written.
    #[serde(default)]
    pub alphabet: Alphabet,
    /// Encode text values as base64 (with `=` padding) instead of decoding them.
    #[serde(default)]
    pub encode: bool,
}

/// The base64 alphabet: the two characters after `A-Z`, `a-z` and `0-9`.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "lowercase")]
pub enum Alphabet {
    /// `+` and `/` (RFC 4648 section 4, as in MIME).
    #[default]
    Standard,
    /// `-` and `_`, safe in URLs and file names (RFC 4648 section 5).
    Url,
}
