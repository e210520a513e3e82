//! field-length's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Write how long a field is to another field.
///
/// Each `source` is measured as set by `of`, and the number is written to
/// its `target`. Text is measured over all the field's values, added up:
/// strings as they are, numbers as written and booleans as `true`/`false`;
/// objects, nested lists and nulls count for nothing (with `of = "values"`
/// every value counts as one). An absent field gets 0 unless `skip_absent`.
/// One read and one write per batch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Each `source` field to measure and the `target` field that gets its
    /// length (at least one).
    pub mappings: Vec<FieldMapping>,
    /// What is counted.
    #[serde(default)]
    pub of: Of,
    /// Leave `target` unset when `source` is absent, instead of writing 0.
    #[serde(default)]
    pub skip_absent: bool,
}

/// What field-length counts.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "lowercase")]
pub enum Of {
    /// How many values the field holds, of any type, nulls too (0 when absent).
    Values,
    /// Characters (Unicode scalar values) of all its values as text.
    #[default]
    Characters,
    /// Bytes of all its values as text, in UTF-8.
    Bytes,
    /// Words of all its values as text, at Unicode word boundaries.
    Words,
}
