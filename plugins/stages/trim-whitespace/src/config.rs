//! trim-whitespace's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Trim leading and trailing whitespace from text values.
///
/// In a multi-valued field each text value is trimmed; values that are not
/// text (numbers, booleans, objects) are left as they are, and a field is
/// written only when a value changed. A value trimmed to nothing stays, as
/// empty text. With `fields` named, two host calls per batch (read them all
/// as JSON, write what changed); with every field, two per document.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields to trim; empty or absent: every field of each document.
    #[serde(default)]
    pub fields: Vec<String>,
}
