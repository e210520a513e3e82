//! detect-language: write the language a text field is written in, as an
//! ISO 639-3 code, with how sure the guess is.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};
use whatlang::detect;

struct DetectLanguage(Config);

impl BatchStage for DetectLanguage {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if !(0.0..=1.0).contains(&config.min_confidence) {
            issues.push(issue("min_confidence", "must be between 0 and 1"));
        }
        if config.max_chars == 0 || config.max_chars > 10_000_000 {
            issues.push(issue("max_chars", "must be 1 to 10,000,000"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.detect(doc)))
    }
}

impl DetectLanguage {
    fn detect(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.0;
        let mut sample = String::new();
        let mut count = 0;
        for text in doc.get_strings(&c.source) {
            for ch in text.chars() {
                if count == c.max_chars {
                    break;
                }
                sample.push(ch);
                count += 1;
            }
            sample.push('\n');
        }
        let guess = detect(&sample).filter(|info| info.confidence() >= c.min_confidence);
        let mut changes = Vec::new();
        match guess {
            Some(info) => {
                changes.push(FieldChange::set_string(
                    c.target.as_str(),
                    info.lang().code(),
                ));
                if let Some(field) = &c.confidence_field {
                    let confidence = (info.confidence() * 1000.0).round() / 1000.0;
                    changes.push(FieldChange::set_json(
                        field.as_str(),
                        confidence.to_string(),
                    ));
                }
            }
            None => match &c.unknown {
                Some(unknown) => {
                    changes.push(FieldChange::set_string(c.target.as_str(), unknown.as_str()))
                }
                None => return Ok(()),
            },
        }
        doc.update(&changes).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(DetectLanguage);
