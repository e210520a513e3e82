//! parse-date's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Read dates written in many ways and write them as RFC 3339 in UTC
/// (`2024-05-01T13:45:00Z`), the form search engines index as dates.
///
/// Each text value (trimmed) is tried as RFC 3339, RFC 2822, then each of
/// `formats`, then the defaults `%Y-%m-%d`, `%Y-%m-%dT%H:%M:%S`,
/// `%Y-%m-%d %H:%M:%S`, `%Y/%m/%d`. A format without a time means midnight;
/// a date without an offset is read in `timezone`. Numbers are seconds since
/// 1970 (or milliseconds, by `epoch`), kept to the millisecond. Each value
/// of a multi-valued field is read on its own; other values (booleans,
/// objects) and nulls are left as they are. A value none of them reads is
/// handled by `on_error`. Two host calls per batch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose dates are rewritten in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Write the dates of `source` to `target` instead (with `fields`, or
    /// alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// Formats tried before the defaults, in order, in chrono's strftime
    /// syntax (`%d/%m/%Y`, `%B %e, %Y`).
    #[serde(default)]
    pub formats: Vec<String>,
    /// The offset dates without one are read in: `+02:00`, `-05:30` or `UTC`
    /// (the default). A fixed offset, not a named zone: no daylight saving.
    pub timezone: Option<String>,
    /// The unit of numbers.
    #[serde(default)]
    pub epoch: Epoch,
    /// What happens to a value that no format reads.
    #[serde(default)]
    pub on_error: OnError,
}

/// What parse-date does with a value it cannot read.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Fail the document, naming the field and the value.
    #[default]
    Fail,
    /// Keep the value as it is.
    Keep,
    /// Replace the value with null (the field is kept; in a list, a null
    /// takes the value's place).
    Remove,
}

/// The unit of a number read as a date.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum Epoch {
    /// Seconds since 1970-01-01T00:00:00Z.
    #[default]
    Seconds,
    /// Milliseconds since 1970-01-01T00:00:00Z.
    Millis,
}
