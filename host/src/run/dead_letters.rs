//! A local run's dead letters: every document that failed, with why, kept
//! in a JSON-lines file the user can read and `weir replay`.
//!
//! One record per line: `{"id", "run_id", "pipeline", "plugin", "error",
//! "attempts", "failed_at", "document"}`, the document whole as `to-json`
//! gives it. The file is made when the first document fails, and each
//! record is flushed as it is written: a run that dies keeps what failed.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::core::document::Document;
pub use crate::core::failure::DeadLetter;
use crate::core::failure::Failure;
use crate::plugin::{IndexerInstance, IndexerPlugin};

/// The dead-letter file of one run, shared by its workers and indexers,
/// and the indexer plugin that takes the letters first, if any.
#[derive(Debug)]
pub(crate) struct DeadLetterFile {
    path: PathBuf,
    file: Mutex<Option<BufWriter<File>>>,
    plugin: Option<Mutex<IndexerInstance>>,
}

impl DeadLetterFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: Mutex::new(None),
            plugin: None,
        }
    }

    /// Send letters to an instance of `plugin` (an indexer) first; when it
    /// cannot start, they go to the file (logged).
    pub(crate) fn with_plugin(mut self, plugin: &IndexerPlugin) -> Self {
        let started = plugin.instantiate().and_then(|mut instance| {
            instance.validate_connection()?;
            Ok(instance)
        });
        match started {
            Ok(instance) => self.plugin = Some(Mutex::new(instance)),
            Err(e) => tracing::error!(
                error = %e,
                path = %self.path.display(),
                "the dead-letter plugin cannot start: dead letters go to the file"
            ),
        }
        self
    }

    /// Hand `record` to the plugin; why it did not take it, if it did not.
    fn send(&self, plugin: &Mutex<IndexerInstance>, record: &DeadLetter) -> Result<(), String> {
        let mut json = serde_json::to_value(record).map_err(|e| e.to_string())?;
        // The letter's own fields, and the failed document under `document`.
        if let Some(fields) = json.as_object_mut() {
            fields.remove("run_id");
        }
        let letter = Document::from_json(json).map_err(|e| e.to_string())?;
        let mut instance = plugin.lock().unwrap_or_else(PoisonError::into_inner);
        match instance.send_batch(std::slice::from_ref(&letter)) {
            Ok(Ok(refused)) if refused.is_empty() => Ok(()),
            Ok(Ok(refused)) => Err(refused
                .into_iter()
                .map(|f| f.message)
                .collect::<Vec<_>>()
                .join("; ")),
            Ok(Err(failure)) => Err(failure.message),
            Err(e) => Err(e.to_string()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Append a record for `doc`, which failed in `pipeline`.
    pub(crate) fn write(
        &self,
        pipeline: &str,
        doc: &Document,
        failure: &Failure,
    ) -> Result<(), String> {
        let record = DeadLetter {
            id: doc.id().to_owned(),
            run_id: doc.run_id().map(str::to_owned),
            pipeline: pipeline.to_owned(),
            plugin: failure.plugin.clone(),
            error: failure.message.clone(),
            attempts: failure.attempts,
            failed_at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            document: doc.to_json(),
        };
        if let Some(plugin) = &self.plugin {
            match self.send(plugin, &record) {
                Ok(()) => return Ok(()),
                Err(e) => tracing::warn!(
                    doc_id = %crate::core::text::for_log(&record.id),
                    error = %e,
                    path = %self.path.display(),
                    "the dead-letter plugin refused a letter: it goes to the file"
                ),
            }
        }
        let mut line = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let error = |e: std::io::Error| {
            format!(
                "cannot write the dead letter of `{}` to {}: {e}",
                doc.id(),
                self.path.display()
            )
        };
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(error)?;
            }
            let opened = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(error)?;
            tracing::warn!(path = %self.path.display(), "documents failed: kept in the dead-letter file");
            *file = Some(BufWriter::new(opened));
        }
        let writer = file.as_mut().expect("opened above");
        writer
            .write_all(&line)
            .and_then(|()| writer.flush())
            .map_err(error)
    }
}

impl Drop for DeadLetterFile {
    fn drop(&mut self) {
        if let Some(plugin) = self.plugin.take() {
            let mut instance = plugin.into_inner().unwrap_or_else(PoisonError::into_inner);
            if let Err(e) = instance.close() {
                tracing::warn!(error = %e, "the dead-letter plugin's close failed");
            }
        }
    }
}

/// The records of a dead-letter file, in order; a line that is not a
/// record is an error naming the file and line.
pub fn read_dead_letters(path: &Path) -> Result<Vec<DeadLetter>, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut records = Vec::new();
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(&line).map_err(|e| {
            format!(
                "{}:{}: not a dead-letter record: {e}",
                path.display(),
                number + 1
            )
        })?;
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_appended_and_read_back_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested/dead.jsonl");
        let letters = DeadLetterFile::new(path.clone());
        assert!(!path.exists(), "no file until a document fails");
        let mut doc = Document::new("d1");
        doc.set_run_id(Some("r1".into()));
        doc.set("n", serde_json::json!(7)).expect("set");
        let failure = Failure {
            plugin: "stage-a".into(),
            message: "bad".into(),
            attempts: 3,
            reason: None,
        };
        letters.write("p", &doc, &failure).expect("write");
        letters
            .write("p", &Document::new("d2"), &failure)
            .expect("write");
        let read = read_dead_letters(&path).expect("read");
        assert_eq!(read.len(), 2);
        let first = &read[0];
        assert_eq!(
            (
                first.id.as_str(),
                first.run_id.as_deref(),
                first.plugin.as_str(),
                first.attempts
            ),
            ("d1", Some("r1"), "stage-a", 3)
        );
        assert_eq!(first.document["n"], 7);
        assert!(first.failed_at.ends_with('Z'), "{}", first.failed_at);
    }

    #[test]
    fn a_line_that_is_not_a_record_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("dead.jsonl");
        std::fs::write(&path, "{\"id\":1}\n").expect("write");
        let error = read_dead_letters(&path).expect_err("bad record");
        assert!(error.contains("dead.jsonl:1"), "{error}");
    }
}
