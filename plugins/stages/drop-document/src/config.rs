//! drop-document's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Drop documents so they are not indexed.
///
/// With `field` and `values`, a document is dropped when any value of
/// `field`, as text (numbers and booleans as written, an object as its JSON
/// text; nulls skipped), is exactly one of `values` (case matters). With
/// `field` alone, when `field` is present, with any value (even null or an
/// empty list). With neither, every document is dropped (to stop a branch,
/// with the stage's `when`). A dropped document skips the stages after this
/// one and the host records a DROP for it. One host call per document, and
/// one more for each document dropped.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field that decides; unset drops every document.
    pub field: Option<String>,
    /// Drop only when a value of `field` is one of these (exact text); empty
    /// drops whenever `field` is present. Needs `field`.
    #[serde(default)]
    pub values: Vec<String>,
}
