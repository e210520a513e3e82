//! dictionary-lookup: replace or annotate values with what a dictionary
//! maps them to.
//!
//! ```toml
//! config = { source = "country", target = "country_name", dictionary = { fr = "France", de = "Germany" } }
//! config = { source = "code", target = "labels", file = "/dicts/codes.tsv", ignore_case = true }
//! ```
//!
//! `dictionary` maps a key to a value or a list of values; `file` (in a
//! granted folder) holds one entry a line: the key, then its values, split
//! by `separator` (a tab by default; blank lines and lines starting with
//! `#` skipped). Each value of `source` found in the dictionary adds what
//! it maps to; `target` gets them all (`mode`: `overwrite`, `append` or
//! `skip` a target that exists). A value not found adds nothing, or itself
//! with `keep_unknown`. The file is read once, at `start`, at most
//! `max_file_mib` (default 64) MiB.

use std::collections::HashMap;

use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Mode, Outcome, PluginError, Value, doc_error, issue,
    per_document, text_of, update,
};

#[derive(serde::Deserialize, Clone)]
#[serde(untagged)]
enum Entry {
    One(String),
    Many(Vec<String>),
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    source: String,
    target: String,
    dictionary: Option<HashMap<String, Entry>>,
    file: Option<String>,
    #[serde(default = "Config::tab")]
    separator: String,
    #[serde(default)]
    ignore_case: bool,
    #[serde(default)]
    keep_unknown: bool,
    #[serde(default)]
    mode: Mode,
    #[serde(default = "Config::max_file_mib")]
    max_file_mib: u64,
}

impl Config {
    fn tab() -> String {
        "\t".into()
    }
    fn max_file_mib() -> u64 {
        64
    }
}

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
