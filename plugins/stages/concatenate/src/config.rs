//! concatenate's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use std::collections::BTreeMap;

/// Build a text field from a format string with `{field}` placeholders.
///
/// Each placeholder becomes the first value of its field: text as it is,
/// numbers and booleans as written, an object or array as its JSON text.
/// A field that is absent, empty or whose first value is null takes its
/// entry in `defaults`, or else the placeholder stays as written (`{name}`).
/// `target` is always written, single-valued, replacing what it held. Per
/// document, one host call reads every placeholder's field and one writes
/// `target`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field the result is written to.
    pub target: String,
    /// The text to build: `{name}` is replaced by field `name`'s first value,
    /// `{{` and `}}` are literal braces. An empty `{}`, a `{` inside a
    /// placeholder or a lone `}` is a config error.
    pub format: String,
    /// Placeholder field name -> the text it takes when that field is absent
    /// (or empty, or null).
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
}
