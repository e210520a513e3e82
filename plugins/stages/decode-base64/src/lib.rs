//! decode-base64: decode base64 text values to text, or (with `encode`) encode text as base64.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use config::{Alphabet, Config};
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, field_pairs, map_values,
};

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
