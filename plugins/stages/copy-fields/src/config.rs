//! copy-fields's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::{FieldMapping, Mode};

/// Copy the values of fields to other fields.
///
/// Each `source` is copied to its `target` as it is: a single value stays
/// single, an object stays an object, a multi-valued field stays
/// multi-valued (but a list of one value is copied as that one value; with
/// `mode = "append"` the values are added one by one). An absent
/// `source` copies nothing and leaves `target` as it is. Mappings apply in
/// order: one may read a field an earlier one wrote, and with `skip` a
/// target an earlier mapping wrote counts as existing. With `overwrite` and
/// `skip`, two host calls per batch (more only for a document whose source
/// is multi-valued or null); with `append`, or mappings that read the
/// target of an earlier one, two per document.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Source -> target pairs, applied in order (at least one; a source and
    /// its target must differ).
    pub mappings: Vec<FieldMapping>,
    /// How to write a target that already has values.
    #[serde(default)]
    pub mode: Mode,
}
