//! replace-patterns: replace what regular expressions match in text values.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::{Config, MAX_PATTERN_BYTES};
use regex::{Regex, RegexBuilder};
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, field_pairs, issue, map_values,
};

struct ReplacePatterns {
    pairs: Vec<(String, String)>,
    replacements: Vec<(Regex, String)>,
}

fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(MAX_PATTERN_BYTES)
        .dfa_size_limit(MAX_PATTERN_BYTES)
        .build()
}

impl BatchStage for ReplacePatterns {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default();
        if config.replacements.is_empty() {
            issues.push(issue(
                "replacements",
                "needs at least one { pattern, with }",
            ));
        }
        for (i, r) in config.replacements.iter().enumerate() {
            if let Err(e) = compile(&r.pattern) {
                issues.push(issue(format!("replacements[{i}].pattern"), e.to_string()));
            }
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        let replacements = config
            .replacements
            .into_iter()
            .map(|r| Ok((compile(&r.pattern).map_err(|e| e.to_string())?, r.with)))
            .collect::<Result<_, String>>()?;
        Ok(Self {
            pairs,
            replacements,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(map_values(docs, &self.pairs, |value| {
            let Json::String(text) = value else {
                return Ok(None);
            };
            let mut out = std::borrow::Cow::Borrowed(text.as_str());
            for (regex, with) in &self.replacements {
                if let std::borrow::Cow::Owned(s) = regex.replace_all(&out, with.as_str()) {
                    out = std::borrow::Cow::Owned(s);
                }
            }
            Ok(Some(Json::String(out.into_owned())))
        }))
    }
}

weir_plugin::export_batch_stage!(ReplacePatterns);
