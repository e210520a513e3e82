//! extract-entities: find the terms of a dictionary in text fields and
//! write what they stand for.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use aho_corasick::{AhoCorasick, MatchKind};
use config::Config;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, is_whole_word, issue,
    text_of, update_batch,
};

const MAX_TERMS: usize = 1_000_000;

struct ExtractEntities {
    config: Config,
    matcher: AhoCorasick,
    entities: Vec<String>,
}

impl ExtractEntities {
    fn fold(&self, text: &str) -> String {
        if self.config.ignore_case {
            text.to_lowercase()
        } else {
            text.to_owned()
        }
    }

    /// The entities of `text`, added to `found` once each.
    fn find(&self, text: &str, found: &mut Vec<usize>) {
        let text = self.fold(text);
        for m in self.matcher.find_iter(&text) {
            if self.config.whole_words && !is_whole_word(&text, m.start(), m.end()) {
                continue;
            }
            let entity = m.pattern().as_usize();
            if !found.contains(&entity) {
                found.push(entity);
            }
        }
    }
}

impl BatchStage for ExtractEntities {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.sources.is_empty() {
            issues.push(issue("sources", "needs at least one field"));
        }
        if config.target.is_empty() {
            issues.push(issue("target", "must name a field"));
        }
        if config.terms.is_empty() && config.file.is_none() {
            issues.push(issue("terms", "needs `terms` or a `file` of them"));
        }
        if config.terms.keys().any(|t| t.trim().is_empty()) {
            issues.push(issue(
                "terms",
                "an empty term matches everywhere: leave it out",
            ));
        }
        if config.terms.len() > MAX_TERMS {
            issues.push(issue("terms", format!("at most {MAX_TERMS} terms")));
        }
        if config.max_file_mib == 0 || config.max_file_mib > 1024 {
            issues.push(issue("max_file_mib", "must be 1 to 1024"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let mut pairs: Vec<(String, String)> = config
            .terms
            .iter()
            .map(|(t, e)| (t.clone(), e.clone()))
            .collect();
        if let Some(path) = &config.file {
            let text = weir_plugin::read_text_file("terms file", path, config.max_file_mib)?;
            for line in text.lines() {
                if line.trim().is_empty() || line.starts_with('#') {
                    continue;
                }
                let (term, entity) = line.split_once('\t').unwrap_or((line, line));
                if !term.trim().is_empty() {
                    pairs.push((term.trim().to_owned(), entity.trim().to_owned()));
                }
            }
        }
        if pairs.len() > MAX_TERMS {
            return Err(format!("{} terms, more than {MAX_TERMS}", pairs.len()));
        }
        let fold = |t: &str| {
            if config.ignore_case {
                t.to_lowercase()
            } else {
                t.to_owned()
            }
        };
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(pairs.iter().map(|(t, _)| fold(t)))
            .map_err(|e| format!("cannot build the matcher: {e}"))?;
        // Terms standing for the same entity report it once.
        let entities = pairs.into_iter().map(|(_, e)| e).collect();
        Ok(Self {
            config,
            matcher,
            entities,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let names = self.config.sources.clone();
        Ok(update_batch(docs, &names, |_, answers| {
            let mut found = Vec::new();
            for json in answers.iter().flatten() {
                let Ok(value) = serde_json::from_str::<Json>(json) else {
                    continue;
                };
                let values = match &value {
                    Json::Array(items) => items.iter().collect(),
                    one => vec![one],
                };
                for text in values.into_iter().filter_map(text_of) {
                    self.find(&text, &mut found);
                }
            }
            let mut names: Vec<&str> = Vec::new();
            for i in found {
                let entity = self.entities[i].as_str();
                if !names.contains(&entity) {
                    names.push(entity);
                }
            }
            if names.is_empty() {
                return (Vec::new(), Ok(()));
            }
            let value = Json::from(names).to_string();
            (
                vec![FieldChange::set_json(self.config.target.as_str(), value)],
                Ok(()),
            )
        }))
    }
}

weir_plugin::export_batch_stage!(ExtractEntities);
