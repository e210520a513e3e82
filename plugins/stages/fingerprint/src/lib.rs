//! fingerprint: a SHA-256 of chosen fields, to find unchanged or equal documents.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use sha2::{Digest, Sha256};
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, issue, update_batch,
};

struct Fingerprint {
    config: Config,
}

fn framed(hash: &mut Sha256, bytes: &[u8]) {
    hash.update((bytes.len() as u64).to_be_bytes());
    hash.update(bytes);
}

/// `value` as JSON with every object's keys sorted.
fn canonical(value: &Json) -> String {
    match value {
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Json::from(k.as_str()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Json::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(canonical).collect::<Vec<_>>().join(",")
            )
        }
        other => other.to_string(),
    }
}

pub fn digest(fields: &[String], answers: &[Option<String>]) -> Result<String, String> {
    let mut hash = Sha256::new();
    for (name, json) in fields.iter().zip(answers) {
        framed(&mut hash, name.as_bytes());
        match json {
            None => hash.update([0]),
            Some(json) => {
                let value: Json =
                    serde_json::from_str(json).map_err(|e| format!("`{name}`: {e}"))?;
                hash.update([1]);
                framed(&mut hash, canonical(&value).as_bytes());
            }
        }
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

impl BatchStage for Fingerprint {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.fields.is_empty() {
            issues.push(issue("fields", "needs at least one field"));
        }
        if config.target.is_empty() {
            issues.push(issue("target", "must name a field"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self { config })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let c = &self.config;
        Ok(update_batch(docs, &c.fields, |_, answers| {
            match digest(&c.fields, &answers) {
                Ok(hex) => (
                    vec![FieldChange::set_string(c.target.as_str(), hex)],
                    Ok(()),
                ),
                Err(e) => (Vec::new(), Err(PluginError::Document(e))),
            }
        }))
    }
}

weir_plugin::export_batch_stage!(Fingerprint);
