//! decode-base64: decode base64 text values, to text or (with
//! `encode = true`) encode text as base64.
//!
//! ```toml
//! config = { fields = ["payload"], alphabet = "standard" }
//! ```
//!
//! `alphabet` is `standard` (default, `+/`, padding optional) or `url`
//! (`-_`). Decoded bytes must be UTF-8 (a document holds text, not bytes),
//! or the document fails saying so. `mappings = [{ source, target }]`
//! writes the result to another field.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldMapping, Outcome, PluginError, field_pairs, map_values,
};

#[derive(serde::Deserialize, Clone, Copy, Default)]
#[serde(rename_all = "lowercase")]
enum Alphabet {
    #[default]
    Standard,
    Url,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fields: Vec<String>,
    #[serde(default)]
    mappings: Vec<FieldMapping>,
    #[serde(default)]
    alphabet: Alphabet,
    #[serde(default)]
    encode: bool,
}

struct DecodeBase64 {
    pairs: Vec<(String, String)>,
    engine: GeneralPurpose,
    encode: bool,
}

impl BatchStage for DecodeBase64 {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        let lenient = GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true);
        let alphabet = match config.alphabet {
            Alphabet::Standard => &base64::alphabet::STANDARD,
            Alphabet::Url => &base64::alphabet::URL_SAFE,
        };
        Ok(Self {
            pairs,
            engine: GeneralPurpose::new(alphabet, lenient),
            encode: config.encode,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(map_values(docs, &self.pairs, |value| {
            let Json::String(text) = value else {
                return Ok(None);
            };
            if self.encode {
                return Ok(Some(Json::String(self.engine.encode(text))));
            }
            let compact: String = text.split_whitespace().collect();
            let bytes = self
                .engine
                .decode(compact)
                .map_err(|e| format!("is not base64: {e}"))?;
            let decoded = String::from_utf8(bytes)
                .map_err(|e| format!("decodes to bytes that are not UTF-8 text ({e})"))?;
            Ok(Some(Json::String(decoded)))
        }))
    }
}

weir_plugin::export_batch_stage!(DecodeBase64);
