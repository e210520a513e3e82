//! hash-bucket: put each document in one of `buckets` buckets by a field's hash.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, issue, text_of,
    update_batch,
};

/// 64-bit FNV-1a.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

struct HashBucket(Config, Vec<String>);

impl BatchStage for HashBucket {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.buckets == 0 {
            return vec![issue("buckets", "must be at least 1")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let reads = vec![config.source.clone()];
        Ok(Self(config, reads))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let c = &self.0;
        if c.source == "id" {
            return Ok(docs
                .iter()
                .map(|doc| {
                    let bucket = fnv1a(doc.id().bytes()) % c.buckets;
                    doc.update(&[FieldChange::set_json(c.target.as_str(), bucket.to_string())])
                        .map_err(weir_plugin::doc_error)
                        .into()
                })
                .collect());
        }
        Ok(update_batch(docs, &self.1, |_, answers| {
            let Some(Some(json)) = answers.into_iter().next() else {
                return (Vec::new(), Ok(()));
            };
            let values = match serde_json::from_str::<Json>(&json) {
                Ok(Json::Array(items)) => items,
                Ok(one) => vec![one],
                Err(e) => {
                    return (
                        Vec::new(),
                        Err(PluginError::Document(format!("`{}`: {e}", c.source))),
                    );
                }
            };
            let texts: Vec<String> = values
                .iter()
                .filter_map(text_of)
                .map(|t| t.into_owned())
                .collect();
            if texts.is_empty() {
                return (Vec::new(), Ok(()));
            }
            let bucket = fnv1a(texts.join("\u{1f}").into_bytes()) % c.buckets;
            (
                vec![FieldChange::set_json(c.target.as_str(), bucket.to_string())],
                Ok(()),
            )
        }))
    }
}

weir_plugin::export_batch_stage!(HashBucket);
