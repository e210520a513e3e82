//! apply-regex: extract regex matches from source fields into a target field.
//!
//! ```toml
//! config = { source = "body", target = "emails", pattern = '[\w.]+@[\w.]+', mode = "overwrite" }
//! ```
//! Each match contributes its first capture group when the pattern has one,
//! else the whole match. With no match the target is left alone.

use regex::{Regex, RegexBuilder};
use weir_plugin::{
    ConfigIssue, Document, Mode, PluginError, Stage, Value, doc_error, issue, update,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    source: String,
    target: String,
    pattern: String,
    #[serde(default)]
    ignore_case: bool,
    /// Take every match (true) or only the first per value (false).
    #[serde(default = "yes")]
    all_matches: bool,
    #[serde(default)]
    mode: Mode,
}

fn yes() -> bool {
    true
}

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

impl Stage for ApplyRegex {
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

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
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
        if !found.is_empty() {
            update(doc, &c.target, found, c.mode).map_err(doc_error)?;
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(ApplyRegex);
