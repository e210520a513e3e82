//! normalize-text's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::FieldMapping;

/// Make text values comparable: case, whitespace, accents and Unicode normal
/// form.
///
/// The steps run in this order: `strip_accents`, then `form`, then `case`,
/// then `whitespace`. Each text value of a multi-valued field is normalized
/// on its own; values that are not text (numbers too) are left as they are,
/// and copied as they are to a mapping's `target`. Two host calls per batch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields whose text values are normalized in place.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Normalize the values of `source` into `target` instead (with `fields`,
    /// or alone).
    #[serde(default)]
    pub mappings: Vec<FieldMapping>,
    /// Letter case, changed by Unicode's rules.
    #[serde(default)]
    pub case: Case,
    /// What happens to whitespace.
    #[serde(default)]
    pub whitespace: Whitespace,
    /// Remove combining marks after decomposing (`é` → `e`): every mark,
    /// Indic vowel signs too. With `form = "keep"` the text is left
    /// decomposed (NFD).
    #[serde(default)]
    pub strip_accents: bool,
    /// The Unicode normal form the text is put in.
    #[serde(default)]
    pub form: Form,
}

/// Letter case.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    /// Lower case.
    Lower,
    /// Upper case.
    Upper,
    /// Leave the case as it is.
    #[default]
    Keep,
}

/// Whitespace handling.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum Whitespace {
    /// Runs of whitespace become one space, and both ends are trimmed.
    #[default]
    Collapse,
    /// Only trim whitespace at both ends.
    Trim,
    /// Leave whitespace as it is.
    Keep,
}

/// Unicode normal form.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    /// Canonical composition (NFC).
    #[default]
    Nfc,
    /// Compatibility composition (NFKC): `ﬁ` → `fi`, full-width forms to ASCII.
    Nfkc,
    /// Canonical decomposition (NFD).
    Nfd,
    /// Compatibility decomposition (NFKD).
    Nfkd,
    /// Leave the form as it is.
    Keep,
}
