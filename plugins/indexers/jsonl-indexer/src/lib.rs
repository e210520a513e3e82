//! jsonl-indexer: write each document as one JSON line to a file.
//!
//! ```toml
//! [indexer.grants]
//! dirs = [{ host = "out", guest = "/out", writable = true }]
//! [indexer.config]
//! path = "/out/documents.jsonl"
//! ```
//! The file is truncated at start unless `append`. A batch is written and
//! flushed as a whole, so a line is never half written when a send returns.

use std::fs::{File, OpenOptions};
use std::io::Write;

use weir_plugin::{BatchError, Document, DocumentFailure, Indexer, PluginError};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    path: String,
    #[serde(default)]
    append: bool,
}

struct JsonlIndexer {
    file: File,
    batch: Vec<u8>,
}

impl Indexer for JsonlIndexer {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(config.append)
            .truncate(!config.append)
            .open(&config.path)
            .map_err(|e| format!("cannot open {}: {e}", config.path))?;
        Ok(Self {
            file,
            batch: Vec::new(),
        })
    }

    fn add_document(&mut self, doc: &Document) -> Result<(), PluginError> {
        self.batch.extend_from_slice(doc.to_json().as_bytes());
        self.batch.push(b'\n');
        Ok(())
    }

    fn send_batch(&mut self) -> Result<Vec<DocumentFailure>, BatchError> {
        let batch = std::mem::take(&mut self.batch);
        self.file
            .write_all(&batch)
            .and_then(|()| self.file.flush())
            .map_err(|e| BatchError {
                message: format!("write failed: {e}"),
                status: None,
                connection_failed: false,
            })?;
        Ok(Vec::new())
    }
}

weir_plugin::export_indexer!(JsonlIndexer);
