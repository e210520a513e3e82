//! apply-regex: extract what a regular expression matches in a field into another field.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use regex::{Regex, RegexBuilder};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Mode, Outcome, PluginError, Value, doc_error, issue,
    per_document,
};

fn compile(config: &Config) -> Result<Regex, String> {
    RegexBuilder::new(&config.pattern)
        .case_insensitive(config.ignore_case)
        .build()
        .map_err(|e| e.to_string())
}

struct ApplyRegex {
    config: Config,
    regex: Regex,
}

impl BatchStage for ApplyRegex {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        match compile(config) {
            Ok(_) => Vec::new(),
            Err(e) => vec![issue("pattern", e)],
        }
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self {
            regex: compile(&config)?,
            config,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.extract(doc)))
    }
}

impl ApplyRegex {
    fn extract(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.config;
        let mut found = Vec::new();
        for text in doc.get_strings(&c.source) {
            for caps in self.regex.captures_iter(&text) {
                let m = caps.get(1).or_else(|| caps.get(0));
                if let Some(m) = m {
                    found.push(Value::Text(m.as_str().to_owned()));
                }
                if !c.all_matches {
                    break;
                }
            }
        }
        if found.is_empty() {
            return Ok(());
        }
        let exists = c.mode == Mode::Skip && doc.has(&c.target);
        doc.update(&c.mode.changes(&c.target, found, exists))
            .map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(ApplyRegex);
