//! jsonl-indexer: write each document as one JSON line to a file.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod sweep;

use std::fs::{File, OpenOptions};
use std::io::Write;

use config::Config;
use weir_plugin::sweep::Sweep;
use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, ConfigIssue, DocumentFailure, Indexer, Packed, batch_error,
};

struct JsonlIndexer {
    path: String,
    file: File,
    /// The batch's lines, written with one call.
    buffer: Vec<u8>,
}

/// Where the sweep fields start in `pick` (after `_deleted`).
const SWEEP_AT: usize = 1;

fn open(path: &str, truncate: bool) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(!truncate)
        .write(true)
        .truncate(truncate)
        .open(path)
        .map_err(|e| format!("cannot open {path}: {e}"))
}

impl Indexer for JsonlIndexer {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        config::check(config)
    }

    fn start(config: Config) -> Result<Self, String> {
        let path = weir_plugin::instance_path(&config.path)?;
        let file = open(&path, config.truncate_at_start)?;
        Ok(Self {
            path,
            file,
            buffer: Vec::new(),
        })
    }

    /// Whole documents; a deletion marker is written as the line
    /// `{"id":...,"run_id":...,"_deleted":true}`, for whoever reads the file.
    /// Sweep markers are picked, and never written.
    fn batch_format(&self) -> BatchFormat {
        let mut pick = vec![weir_plugin::DELETED_FIELD.to_owned()];
        pick.extend(weir_plugin::sweep::picks());
        BatchFormat {
            pick,
            ..weir_plugin::whole_json()
        }
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.write_lines(batch.iter().map(|entry| {
            (
                entry.json.as_deref(),
                weir_plugin::sweep::sweep_of(&entry.id, &entry.picked, SWEEP_AT),
            )
        }))
    }

    /// Lines straight from the batch's text: no copy of each document.
    fn index_packed(&mut self, batch: &Packed<'_>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.write_lines(batch.entries().map(|entry| {
            let sweep =
                Sweep::from_picked(entry.id, |i| entry.picked(SWEEP_AT + i).first().copied());
            (entry.json, sweep)
        }))
    }
}

impl JsonlIndexer {
    /// One line per document's JSON text, written and flushed at once; a
    /// sweep marker sweeps the file after the lines before it.
    fn write_lines<'a>(
        &mut self,
        entries: impl Iterator<Item = (Option<&'a str>, Option<Result<Sweep, String>>)>,
    ) -> Result<Vec<DocumentFailure>, BatchError> {
        self.buffer.clear();
        let mut failures = Vec::new();
        for (index, (json, sweep)) in entries.enumerate() {
            if let Some(sweep) = sweep {
                self.flush()?;
                if let Err(message) = sweep.and_then(|sweep| self.sweep(&sweep)) {
                    failures.push(weir_plugin::failure(index, message));
                }
                continue;
            }
            let json = json.ok_or_else(|| batch_error("the host sent no JSON"))?;
            self.buffer.extend_from_slice(json.as_bytes());
            self.buffer.push(b'\n');
        }
        self.flush()?;
        Ok(failures)
    }

    fn flush(&mut self) -> Result<(), BatchError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(&self.buffer)
            .and_then(|()| self.file.flush())
            .map_err(|e| batch_error(format!("write failed: {e}")))?;
        self.buffer.clear();
        Ok(())
    }

    fn sweep(&mut self, sweep: &Sweep) -> Result<(), String> {
        let (_, instances) = weir_plugin::indexer_instance();
        if instances > 1 {
            return Err(format!(
                "sweep of `{}` refused: {instances} indexer instances write one file each, and a \
                 sweep reaches one of them; set `indexer.instances = 1` for full syncs to clean up",
                sweep.source
            ));
        }
        let swept = sweep::sweep_file(&self.path, sweep)?;
        // The file is a new one now: append to it, not to the one replaced.
        self.file = open(&self.path, false)?;
        weir_plugin::info!(
            "swept {}: {} of {} documents of `{}` older than generation {} deleted; {} lines kept of {}",
            self.path,
            swept.deleted,
            swept.of_source,
            sweep.source,
            sweep.generation,
            swept.lines_after,
            swept.lines_before
        );
        Ok(())
    }
}

weir_plugin::export_indexer!(JsonlIndexer);
