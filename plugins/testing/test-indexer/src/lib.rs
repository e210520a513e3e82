//! test-indexer: an indexer backend that fails where told, to test batching,
//! retries and per-document failures.
//!
//! Config: `fail_validation`; `fail_ids` (refused one by one, status 400);
//! `batch_failures` (the first that many `send-batch` calls fail as a whole)
//! with `batch_status` (default 503) or `connection_failed`; `record` (a file
//! to append `<batch number> <id>` lines to, for each document indexed).

use std::io::Write;

use weir_plugin::{BatchError, Document, DocumentFailure, Indexer, PluginError};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fail_validation: bool,
    #[serde(default)]
    fail_ids: Vec<String>,
    #[serde(default)]
    batch_failures: u32,
    batch_status: Option<u16>,
    #[serde(default)]
    connection_failed: bool,
    record: Option<String>,
}

struct TestIndexer {
    config: Config,
    batch: Vec<String>,
    sends: u32,
}

impl Indexer for TestIndexer {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self {
            config,
            batch: Vec::new(),
            sends: 0,
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

    fn add_document(&mut self, doc: &Document) -> Result<(), PluginError> {
        self.batch.push(doc.id());
        Ok(())
    }

    fn send_batch(&mut self) -> Result<Vec<DocumentFailure>, BatchError> {
        let ids = std::mem::take(&mut self.batch);
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
        let (failed, indexed): (Vec<String>, Vec<String>) = ids
            .into_iter()
            .partition(|id| self.config.fail_ids.contains(id));
        if let Some(path) = &self.config.record {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| BatchError {
                    message: e.to_string(),
                    status: None,
                    connection_failed: false,
                })?;
            for id in &indexed {
                writeln!(file, "{} {id}", self.sends).map_err(|e| BatchError {
                    message: e.to_string(),
                    status: None,
                    connection_failed: false,
                })?;
            }
        }
        Ok(failed
            .into_iter()
            .map(|id| DocumentFailure {
                id,
                message: "refused by the backend (configured)".into(),
                status: Some(400),
            })
            .collect())
    }
}

weir_plugin::export_indexer!(TestIndexer);
