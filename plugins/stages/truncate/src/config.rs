//! truncate's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Cut text values to at most `max_chars` characters.
///
/// Characters are Unicode scalar values, so a cut never splits one. Values
/// that are not text are left as they are. Two host calls per batch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose values are cut in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Cut the values of `source` into `target` instead (with `fields`, or alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// Most characters a value keeps, `ellipsis` included (at least 1).
    pub max_chars: usize,
    /// Move a cut back to the last whitespace before it, when there is one.
    #[serde(default)]
    pub at_word: bool,
    /// Text appended to a cut value; it counts towards `max_chars`.
    #[serde(default)]
    pub ellipsis: String,
}
