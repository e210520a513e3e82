//! detect-language's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Write the language a text field is written in, as an ISO 639-3 code
/// (`eng`, `fra`, `deu`, ...; 69 languages), with how sure the guess is.
///
/// The guess is made from the first `max_chars` characters of the field's
/// values, all of them taken together (numbers and booleans as written, an
/// object as its JSON text), so a huge text costs no more than that; it
/// uses the `whatlang` crate's trigram models. A text too short or too
/// mixed to tell, an absent field, and a guess less sure than
/// `min_confidence` write `unknown` to `target` when it is set, and nothing
/// otherwise (a `target` the document already has is then left as it is).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field holding the text.
    pub source: String,
    /// The field that gets the language's ISO 639-3 code.
    #[serde(default = "Config::language")]
    pub target: String,
    /// A field that gets how sure the guess is, from 0 to 1 (three decimals).
    /// Unset: not written.
    pub confidence_field: Option<String>,
    /// Least confidence a guess needs to be written, from 0 to 1.
    #[serde(default)]
    pub min_confidence: f64,
    /// Most characters read from the field, all its values together
    /// (1 to 10,000,000).
    #[serde(default = "Config::max_chars")]
    pub max_chars: usize,
    /// What `target` gets when the language cannot be told (or is under
    /// `min_confidence`), such as `"und"`. Unset: nothing is written.
    pub unknown: Option<String>,
}

impl Config {
    fn language() -> String {
        "language".into()
    }
    fn max_chars() -> usize {
        10_000
    }
}
