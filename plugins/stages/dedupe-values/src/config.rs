//! dedupe-values's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Remove repeated values from multi-valued fields, keeping the first of each in its place.
///
/// Values are the same when their JSON is: numbers as written (`1` and `1.0`
/// differ), objects with their keys in order, nulls like any value. A field
/// changed in place is written only when it lost a value; a single-valued or
/// absent field is left alone. A `target` always gets the source's kept
/// values as a list, even a single value (a list of one). Two host calls per
/// batch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose repeated values are removed in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Write the deduplicated values of `source` to `target` instead (with
    /// `fields`, or alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// Compare text values in lower case (the first spelling is kept); other
    /// values are compared as they are.
    #[serde(default)]
    pub ignore_case: bool,
}
