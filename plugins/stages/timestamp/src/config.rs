//! timestamp's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Write the time a document passed this stage, RFC 3339 in UTC
/// (`2026-12-03T15:54:16.123Z`).
///
/// The time is read once per batch: every document of a batch gets the same
/// time. It is written as one text value, replacing the field's values
/// unless `overwrite = false`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field that gets the time.
    #[serde(default = "Config::field")]
    pub field: String,
    /// How finely the time is written: the digits after the seconds.
    #[serde(default)]
    pub precision: Precision,
    /// Replace the time a document already has in `field`; `false`: a document that has the field keeps it.
    #[serde(default = "Config::overwrite")]
    pub overwrite: bool,
}

impl Config {
    fn field() -> String {
        "timestamp".into()
    }
    fn overwrite() -> bool {
        true
    }
}

/// How finely timestamp writes the time.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Whole seconds: `2026-12-03T15:54:16Z`.
    Seconds,
    /// Three digits: `2026-12-03T15:54:16.123Z`.
    #[default]
    Milliseconds,
    /// Six digits: `2026-12-03T15:54:16.123456Z`.
    Microseconds,
}
