//! dictionary-lookup: replace or annotate values with what a dictionary maps them to.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::collections::HashMap;

use config::{Config, Entry};
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, Value, doc_error, issue, per_document,
    text_of, update,
};

struct DictionaryLookup {
    config: Config,
    entries: HashMap<String, Vec<String>>,
}

impl BatchStage for DictionaryLookup {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.dictionary.is_some() == config.file.is_some() {
            issues.push(issue(
                "dictionary",
                "give exactly one of `dictionary` and `file`",
            ));
        }
        if config.separator.is_empty() {
            issues.push(issue("separator", "is empty"));
        }
        if config.max_file_mib == 0 || config.max_file_mib > 1024 {
            issues.push(issue("max_file_mib", "must be 1 to 1024"));
        }
        if let (true, Some(dictionary)) = (config.ignore_case, &config.dictionary) {
            // Keys equal but for case would each be the one kept, by chance.
            let mut keys: Vec<&String> = dictionary.keys().collect();
            keys.sort();
            let mut seen: HashMap<String, &String> = HashMap::new();
            for key in keys {
                if let Some(first) = seen.insert(key.to_lowercase(), key) {
                    issues.push(issue(
                        format!("dictionary.{key}"),
                        format!("is `{first}` with `ignore_case`: keep one of them"),
                    ));
                }
            }
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let key = |k: &str| {
            if config.ignore_case {
                k.to_lowercase()
            } else {
                k.to_owned()
            }
        };
        let mut entries = HashMap::new();
        if let Some(dictionary) = &config.dictionary {
            for (k, v) in dictionary {
                let values = match v.clone() {
                    Entry::One(s) => vec![s],
                    Entry::Many(vs) => vs,
                };
                entries.insert(key(k), values);
            }
        }
        if let Some(path) = &config.file {
            let text = weir_plugin::read_text_file("dictionary", path, config.max_file_mib)?;
            for line in text.lines() {
                if line.trim().is_empty() || line.starts_with('#') {
                    continue;
                }
                let mut parts = line.split(config.separator.as_str());
                let k = parts.next().unwrap_or_default();
                entries.insert(key(k), parts.map(str::to_owned).collect());
            }
        }
        Ok(Self { config, entries })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.look_up(doc)))
    }
}

impl DictionaryLookup {
    fn look_up(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.config;
        let Some(json) = doc.get_json(&c.source) else {
            return Ok(());
        };
        let values = match serde_json::from_str::<Json>(&json) {
            Ok(Json::Array(items)) => items,
            Ok(one) => vec![one],
            Err(e) => return Err(PluginError::Document(format!("`{}`: {e}", c.source))),
        };
        let mut out = Vec::new();
        for value in &values {
            let Some(text) = text_of(value) else { continue };
            let key = if c.ignore_case {
                text.to_lowercase()
            } else {
                text.to_string()
            };
            match self.entries.get(&key) {
                Some(mapped) => out.extend(mapped.iter().map(|m| Value::Text(m.clone()))),
                None if c.keep_unknown => out.push(Value::Text(text.into_owned())),
                None => {}
            }
        }
        if out.is_empty() {
            return Ok(());
        }
        update(doc, &c.target, out, c.mode).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(DictionaryLookup);
