//! remove-empty-fields's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Remove fields that hold nothing: null, empty text, an empty list, an
/// empty object.
///
/// In a multi-valued field, the empty values are removed and the rest kept;
/// a field left with none is removed. Numbers and booleans are never empty,
/// and what a non-empty object holds is not looked into. Two host calls per
/// document (read every field named, write the changes).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields to clean; empty or absent: every field of each document.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Text of only whitespace counts as empty too.
    #[serde(default)]
    pub blank: bool,
}
