//! truncate: cut text values to at most `max_chars` characters.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, field_pairs, issue, map_values,
};

struct Truncate {
    pairs: Vec<(String, String)>,
    config: Config,
}

impl BatchStage for Truncate {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default();
        if config.max_chars == 0 {
            issues.push(issue("max_chars", "must be at least 1"));
        } else if config.ellipsis.chars().count() >= config.max_chars {
            issues.push(issue("ellipsis", "must be shorter than max_chars"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        Ok(Self { pairs, config })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let c = &self.config;
        Ok(map_values(docs, &self.pairs, |value| {
            Ok(match value {
                Json::String(s) => cut(s, c.max_chars, c.at_word, &c.ellipsis).map(Json::String),
                _ => None,
            })
        }))
    }
}

/// `text` cut to `max` characters, or none when it is no longer.
fn cut(text: &str, max: usize, at_word: bool, ellipsis: &str) -> Option<String> {
    let keep = max - ellipsis.chars().count();
    let (end, _) = text.char_indices().nth(max)?;
    let mut end = text.char_indices().nth(keep).map_or(end, |(i, _)| i);
    if at_word
        && let Some(space) = text[..end].rfind(char::is_whitespace)
        && space > 0
    {
        end = space;
    }
    let mut out = text[..end].trim_end().to_owned();
    out.push_str(ellipsis);
    Some(out)
}

weir_plugin::export_batch_stage!(Truncate);
