//! parse-floats's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Turn text holding numbers into a list of numbers (a vector from a CSV
/// cell or a JSON string, say).
///
/// Each text value, `[1.5, 2, -3e-2]` (a JSON array) or `1.5,2,-3e-2`
/// (split on `delimiter`; whitespace around each number ignored), becomes a
/// list of numbers; empty text becomes an empty list. A value that is not
/// text (a number, say) stays as it is; each value of a multi-valued field
/// is parsed on its own. A value that is not a list of finite numbers fails
/// its document, naming it. At most `max_values` numbers a value.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose text values are parsed in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Parse the values of `source` into `target` instead (with `fields`, or alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// What separates the numbers of a value that is not a JSON array (not empty).
    #[serde(default = "Config::delimiter")]
    pub delimiter: String,
    /// Most numbers a value may hold (at least 1); a value with more fails its document.
    #[serde(default = "Config::max_values")]
    pub max_values: usize,
}

impl Config {
    fn delimiter() -> String {
        ",".into()
    }
    fn max_values() -> usize {
        65_536
    }
}
