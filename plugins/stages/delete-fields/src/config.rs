//! delete-fields's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Remove fields by name or by a pattern on their names, or every field but some.
///
/// Give `fields`, `matching` or both (every field named or matched goes), or
/// `keep` alone (every field not listed goes). A field that is absent is
/// simply not there to remove. The document's `id` is not a field and always
/// stays (naming `id`, `run_id` or `_children` in `fields` is a config
/// error). One host call per document (two when `matching` or `keep` needs
/// the document's field names).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields to remove, by exact name.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Remove every field whose name this regular expression matches
    /// anywhere in it (Rust `regex` syntax; anchor it with `^` and `$` to
    /// match whole names). A pattern that does not compile, or compiles to
    /// more than 1 MiB, is a config error.
    pub matching: Option<String>,
    /// Remove every field except these (exact names); it cannot be combined
    /// with `fields` or `matching`. An empty list removes every field.
    pub keep: Option<Vec<String>>,
}
