//! split-field-values's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Split text values on a delimiter into several values.
///
/// Each value of `source` is split, and the pieces of all of them, in order,
/// become the values of `target`. Values that are not text (numbers,
/// booleans) are split as their text; nulls are skipped. Empty pieces are
/// dropped (a source holding only empty pieces leaves `target` an empty
/// list); a document without `source` is left as it is. Two host calls per
/// batch (read the source of every document as JSON, write the pieces), more
/// only for a document whose source is not one text value.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field whose values are split.
    pub source: String,
    /// The field the pieces are written to, replacing its values; unset: `source` itself.
    pub target: Option<String>,
    /// What to split at: literal text, not a pattern (not empty).
    pub delimiter: String,
    /// Trim whitespace around each piece (a piece left empty is dropped).
    #[serde(default = "yes")]
    pub trim: bool,
}

fn yes() -> bool {
    true
}
