//! jsonl-indexer: write each document as one JSON line to a file.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::fs::{File, OpenOptions};
use std::io::Write;

use config::Config;
use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, DocumentFailure, Indexer, Packed, batch_error,
};

struct JsonlIndexer {
    file: File,
    /// The batch's lines, written with one call.
    buffer: Vec<u8>,
}

impl Indexer for JsonlIndexer {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        let path = weir_plugin::instance_path(&config.path)?;
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(config.append)
            .truncate(!config.append)
            .open(&path)
            .map_err(|e| format!("cannot open {path}: {e}"))?;
        Ok(Self {
            file,
            buffer: Vec::new(),
        })
    }

    /// Whole documents; a deletion marker is written as the line
    /// `{"id":...,"run_id":...,"_deleted":true}`, for whoever reads the file.
    fn batch_format(&self) -> BatchFormat {
        BatchFormat {
            pick: vec![weir_plugin::DELETED_FIELD.to_owned()],
            ..weir_plugin::whole_json()
        }
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.write_lines(batch.iter().map(|entry| entry.json.as_deref()))
    }

    /// Lines straight from the batch's text: no copy of each document.
    fn index_packed(&mut self, batch: &Packed<'_>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.write_lines(batch.entries().map(|entry| entry.json))
    }
}

impl JsonlIndexer {
    /// One line per document's JSON text, written and flushed at once.
    fn write_lines<'a>(
        &mut self,
        lines: impl Iterator<Item = Option<&'a str>>,
    ) -> Result<Vec<DocumentFailure>, BatchError> {
        self.buffer.clear();
        for json in lines {
            let json = json.ok_or_else(|| batch_error("the host sent no JSON"))?;
            self.buffer.extend_from_slice(json.as_bytes());
            self.buffer.push(b'\n');
        }
        self.file
            .write_all(&self.buffer)
            .and_then(|()| self.file.flush())
            .map_err(|e| batch_error(format!("write failed: {e}")))?;
        Ok(Vec::new())
    }
}

weir_plugin::export_indexer!(JsonlIndexer);
