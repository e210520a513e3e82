//! apply-regex's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::Mode;

/// Extract what a regular expression matches in a field into another field.
///
/// Every value of `source` is searched as text (numbers and booleans as
/// written, an object or array as its JSON text; nulls are skipped). Each
/// match adds its first capture group when the pattern has one and the group
/// took part in the match, else the whole match. `target` gets every match of
/// every value, in order: one match is stored single-valued, several
/// multi-valued. A document with no match (or no `source`) is left as it is.
/// Rust `regex` syntax, linear time; a pattern that does not compile is a
/// config error. Per document, one host call reads `source` and one writes
/// `target` (with `mode = "skip"`, one more asks whether it exists).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field searched.
    pub source: String,
    /// The field the matches are written to (it may be `source`, to replace
    /// its values with their matches).
    pub target: String,
    /// The regular expression (Rust `regex` syntax); a pattern that can match
    /// empty text adds an empty value where it does.
    pub pattern: String,
    /// Match letters regardless of case.
    #[serde(default)]
    pub ignore_case: bool,
    /// Take every match of each value (true), or only the first match of each
    /// value (false).
    #[serde(default = "yes")]
    pub all_matches: bool,
    /// How to write `target` when it already has values.
    #[serde(default)]
    pub mode: Mode,
}

fn yes() -> bool {
    true
}
