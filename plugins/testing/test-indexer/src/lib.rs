//! test-indexer: an indexer backend that fails where told, to test batching,
//! retries and per-document failures.
//!
//! Config: `fail_validation`; `fail_ids` (refused one by one, status 400);
//! `flaky_ids` (refused with status 429 the first `flaky_times` times each,
//! default 1, then indexed);
//! `batch_failures` (the first that many `index-batch` calls fail as a whole)
//! with `batch_status` (default 503) or `connection_failed`; `record` (a file
//! to append a JSON line to for each document indexed: `batch` number, `id`,
//! `version`, `n`, `m` and `tag` fields when present, and `at_ns`, the
//! wall-clock time).

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use weir_plugin::serde_json::{Value as Json, json};

use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, DocumentFailure, Indexer, PluginError, batch_error,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fail_validation: bool,
    #[serde(default)]
    fail_ids: Vec<String>,
    #[serde(default)]
    flaky_ids: Vec<String>,
    #[serde(default = "one")]
    flaky_times: u32,
    #[serde(default)]
    batch_failures: u32,
    batch_status: Option<u16>,
    #[serde(default)]
    connection_failed: bool,
    record: Option<String>,
}

fn one() -> u32 {
    1
}

struct TestIndexer {
    config: Config,
    sends: u32,
    /// How often each flaky id was refused so far.
    flaky_refusals: std::collections::HashMap<String, u32>,
}

impl Indexer for TestIndexer {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self {
            config,
            sends: 0,
            flaky_refusals: Default::default(),
        })
    }

    fn validate_connection(&mut self) -> Result<(), PluginError> {
        if self.config.fail_validation {
            return Err(PluginError::Fatal(
                "backend unreachable (configured)".into(),
            ));
        }
        Ok(())
    }

    fn batch_format(&self) -> BatchFormat {
        BatchFormat {
            fields: Some(vec!["version".into(), "m".into(), "n".into(), "tag".into()]),
            omit: vec!["run_id".into()],
            ..weir_plugin::whole_json()
        }
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        // Per document: its position, id and what `record` writes about it.
        let ids = batch.into_iter().enumerate().map(|(index, entry)| {
            let shaped: Json = entry
                .json
                .as_deref()
                .and_then(|j| weir_plugin::serde_json::from_str(j).ok())
                .unwrap_or(Json::Null);
            let field = |name: &str| shaped.get(name).cloned().unwrap_or(Json::Null);
            let fields = json!({ "id": entry.id, "version": field("version"), "m": field("m"), "n": field("n"), "tag": field("tag") });
            (index, entry.id, fields.to_string())
        });
        self.sends += 1;
        if self.sends <= self.config.batch_failures {
            return Err(BatchError {
                message: format!("send {} refused (configured)", self.sends),
                status: if self.config.connection_failed {
                    None
                } else {
                    Some(self.config.batch_status.unwrap_or(503))
                },
                connection_failed: self.config.connection_failed,
            });
        }
        let mut flaky = Vec::new();
        let (failed, indexed): (Vec<_>, Vec<_>) = ids
            .into_iter()
            .filter(|(index, id, _)| {
                if !self.config.flaky_ids.contains(id) {
                    return true;
                }
                let refusals = self.flaky_refusals.entry(id.clone()).or_default();
                if *refusals >= self.config.flaky_times {
                    return true;
                }
                *refusals += 1;
                flaky.push(*index);
                false
            })
            .partition(|(_, id, _)| self.config.fail_ids.contains(id));
        if let Some(path) = &self.config.record {
            let io_error = |e: std::io::Error| batch_error(e.to_string());
            let at_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let mut lines = String::new();
            for (_, _, fields) in &indexed {
                let open = fields.trim_end_matches('}');
                lines.push_str(&format!(
                    "{open},\"batch\":{},\"at_ns\":{at_ns}}}\n",
                    self.sends
                ));
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(lines.as_bytes()))
                .map_err(io_error)?;
        }
        let refused = failed.into_iter().map(|(index, _, _)| DocumentFailure {
            status: Some(400),
            ..weir_plugin::failure(index, "refused by the backend (configured)")
        });
        let busy = flaky.into_iter().map(|index| DocumentFailure {
            status: Some(429),
            ..weir_plugin::failure(index, "too many requests (configured)")
        });
        Ok(refused.chain(busy).collect())
    }
}

weir_plugin::export_indexer!(TestIndexer);
