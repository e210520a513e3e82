//! replace-patterns's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Most bytes a pattern may compile to (and its lazy DFA may use): 1 MiB.
pub const MAX_PATTERN_BYTES: usize = 1 << 20;

/// Replace what regular expressions match in text values.
///
/// Replacements apply in order, each to every match, the next one to the
/// result of the one before. Values that are not text are left as they are;
/// each value of a multi-valued field is replaced on its own. Rust `regex`
/// syntax, linear time; each pattern compiles to at most 1 MiB, and one that
/// does not compile is a config error.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose text values are changed in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Write the results for `source` to `target` instead (with `fields`, or alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// The replacements, applied in order (at least one).
    pub replacements: Vec<Replacement>,
}

/// A pattern and what replaces its matches.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Replacement {
    /// A regular expression (Rust `regex` syntax).
    pub pattern: String,
    /// What replaces each match: `$1`, `${name}` insert a group, `$$` a dollar sign.
    pub with: String,
}
