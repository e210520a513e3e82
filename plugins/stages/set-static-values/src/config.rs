//! set-static-values's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::Mode;
use weir_plugin::serde_json::{Map, Value as Json};

/// Set fields to fixed values.
///
/// Each field of `values` gets its value in every document: a list sets
/// several values (an empty list, none), anything else one value (an object
/// is stored as one JSON value). Per document, one host call writes every
/// field (with `mode = "skip"`, one more reads which fields exist).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Field name -> value (any JSON; an array sets several values). At least one field.
    pub values: Map<String, Json>,
    /// What to do when a field already exists.
    #[serde(default)]
    pub mode: Mode,
}
