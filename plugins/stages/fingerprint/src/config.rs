//! fingerprint's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// A SHA-256 of chosen fields, to find documents whose content did not
/// change (skip re-embedding them, say) or that are the same.
///
/// `target` gets the lower-case hex SHA-256 of each field of `fields` in
/// order: its name and its value as JSON (an absent field as absent, so `{}`
/// and `{"a": null}` differ), each framed by its length, so no two different
/// sets of values hash alike by shifting text between fields. Values of any
/// type count, multi-valued fields as their whole list in order. Objects hash
/// alike whatever their keys' order.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The fields hashed, in this order (at least one); the order changes the
    /// fingerprint.
    pub fields: Vec<String>,
    /// The field that gets the fingerprint, 64 hex digits.
    #[serde(default = "Config::target")]
    pub target: String,
}

impl Config {
    fn target() -> String {
        "fingerprint".into()
    }
}
