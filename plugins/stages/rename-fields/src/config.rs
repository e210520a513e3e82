//! rename-fields's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::{FieldMapping, Mode};

/// Rename fields.
///
/// Each mapping moves every value of `source` to `target`, in order; a
/// document without `source` is left as it is. A rename moves values inside
/// the host, so nothing is read: one host call per batch, one per mapping
/// and document.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The renames, applied in order: `source` is renamed to `target` (at least one).
    pub mappings: Vec<FieldMapping>,
    /// What to do when the target already exists.
    #[serde(default)]
    pub mode: Mode,
}
