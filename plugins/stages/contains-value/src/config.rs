//! contains-value's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::serde_json::Value as Json;

/// The most `values` a config may list.
pub const MAX_VALUES: usize = 10_000;

/// Mark documents whose fields hold any of some values.
///
/// Every value of each of `fields` is read as text (numbers and booleans as
/// written; objects, nested lists and nulls are skipped). When one of them
/// holds one of `values`, as `match` says, `target` is set to `value`;
/// otherwise to `otherwise`, or left as it is when `otherwise` is unset. An
/// absent field holds nothing. `target` is replaced, whatever it held. Two
/// host calls per batch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The fields searched (at least one).
    pub fields: Vec<String>,
    /// The values looked for: 1 to 10,000, none empty.
    pub values: Vec<String>,
    /// The field that records the result (not empty).
    pub target: String,
    /// What `target` is set to when a value is found: any value (a list sets
    /// several).
    #[serde(default = "Config::value")]
    pub value: Json,
    /// What `target` is set to when none is found (any value); unset leaves
    /// `target` as it is.
    pub otherwise: Option<Json>,
    /// How a text must hold one of `values`.
    #[serde(default, rename = "match")]
    pub how: Match,
    /// Compare in lower case, so that `ASAP` holds `asap`.
    #[serde(default)]
    pub ignore_case: bool,
}

impl Config {
    fn value() -> Json {
        Json::Bool(true)
    }
}

/// How contains-value compares a text with a value.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq, Eq,
)]
#[serde(rename_all = "lowercase")]
pub enum Match {
    /// The whole text is the value.
    Whole,
    /// The value appears as whole words: no letter, digit or `_` right before or after it.
    #[default]
    Word,
    /// The value appears anywhere, even inside a longer word.
    Substring,
}
