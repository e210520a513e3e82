//! parse-json's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Turn text values that hold JSON into the values they hold.
///
/// `"{\"a\":1}"` becomes the object `{"a": 1}`; numbers keep their digits
/// (`2.50` stays `2.50`; an exponent is written in serde_json's form, `1e400`
/// as `1e+400`, the same number). Values that are not text are left as they
/// are; each value of a multi-valued field is parsed on its own. Text that is
/// not JSON fails the document, naming the field and where the JSON breaks,
/// unless `on_error = "keep"`. The host bounds what the result may grow a
/// document to (`limits.max_document_mib`, `limits.max_depth`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose text values are parsed in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Write the parsed values of `source` to `target` instead (with `fields`, or alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// What happens to text that is not JSON.
    #[serde(default)]
    pub on_error: OnError,
}

/// What parse-json does with text that is not JSON.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Fail the document, naming the field and where the JSON breaks.
    #[default]
    Fail,
    /// Leave the text as it is.
    Keep,
}
