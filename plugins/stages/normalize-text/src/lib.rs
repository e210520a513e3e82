//! normalize-text: make text values comparable (case, whitespace, accents, form).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::{Case, Config, Form, Whitespace};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, field_pairs, map_values,
};

struct NormalizeText {
    pairs: Vec<(String, String)>,
    config: Config,
}

impl BatchStage for NormalizeText {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        Ok(Self { pairs, config })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(map_values(docs, &self.pairs, |value| {
            Ok(match value {
                Json::String(s) => Some(Json::String(self.normalize(s))),
                _ => None,
            })
        }))
    }
}

impl NormalizeText {
    fn normalize(&self, text: &str) -> String {
        let c = &self.config;
        let mut out: String = if c.strip_accents {
            let stripped: String = text.nfd().filter(|ch| !is_combining_mark(*ch)).collect();
            stripped
        } else {
            text.to_owned()
        };
        out = match c.form {
            Form::Nfc => out.nfc().collect(),
            Form::Nfkc => out.nfkc().collect(),
            Form::Nfd => out.nfd().collect(),
            Form::Nfkd => out.nfkd().collect(),
            Form::Keep => out,
        };
        out = match c.case {
            Case::Lower => out.to_lowercase(),
            Case::Upper => out.to_uppercase(),
            Case::Keep => out,
        };
        match c.whitespace {
            Whitespace::Collapse => out.split_whitespace().collect::<Vec<_>>().join(" "),
            Whitespace::Trim => out.trim().to_owned(),
            Whitespace::Keep => out,
        }
    }
}

weir_plugin::export_batch_stage!(NormalizeText);
