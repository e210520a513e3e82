//! csv-indexer: write chosen fields of each document as a CSV row.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::fs::{File, OpenOptions};

use config::Config;
use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, ConfigIssue, DocumentFailure, Indexer, Packed, failure,
    issue, picked,
};

/// Where a column's text comes from.
enum Column {
    Id,
    RunId,
    /// The field picked at this position of the batch format.
    Picked(usize),
}

struct CsvIndexer {
    config: Config,
    columns: Vec<Column>,
    writer: csv::Writer<File>,
    /// A multi-valued field's values joined, reused from row to row.
    joined: String,
}

/// The writer's buffer: a batch of ordinary rows is written at once, so
/// the file sees one write (each is a host call and a thread hop) per
/// 64 KiB, the most the host takes in one write, instead of one per 8 KiB.
const WRITE_BUFFER: usize = 256 << 10;

/// Each column's source, and the fields the host is asked to pick (only
/// the ones that are fields: `id` and `run_id` come with every entry).
fn layout(columns: &[String]) -> (Vec<Column>, Vec<String>) {
    let mut fields = Vec::new();
    let layout = columns
        .iter()
        .map(|column| match column.as_str() {
            "id" => Column::Id,
            "run_id" => Column::RunId,
            field => {
                fields.push(field.to_owned());
                Column::Picked(fields.len() - 1)
            }
        })
        .collect();
    (layout, fields)
}

fn write_failed(e: impl std::fmt::Display) -> BatchError {
    weir_plugin::batch_error(format!("write failed: {e}"))
}

impl Indexer for CsvIndexer {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.columns.is_empty() {
            return vec![issue("columns", "needs at least one column")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let path = weir_plugin::instance_path(&config.path)?;
        let exists = std::fs::metadata(&path).is_ok_and(|m| m.len() > 0);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(config.append)
            .truncate(!config.append)
            .open(&path)
            .map_err(|e| format!("cannot open {path}: {e}"))?;
        let mut writer = csv::WriterBuilder::new()
            .buffer_capacity(WRITE_BUFFER)
            .from_writer(file);
        if !(config.append && exists) {
            writer
                .write_record(&config.columns)
                .map_err(|e| e.to_string())?;
            writer.flush().map_err(|e| e.to_string())?;
        }
        let (columns, _) = layout(&config.columns);
        Ok(Self {
            config,
            columns,
            writer,
            joined: String::new(),
        })
    }

    fn batch_format(&self) -> BatchFormat {
        picked(layout(&self.config.columns).1)
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.rows(batch.iter(), |indexer, entry| {
            let picked = |at: usize| entry.picked.get(at).map_or(&[][..], Vec::as_slice);
            indexer.write_row(&entry.id, entry.run_id.as_deref(), picked)
        })
    }

    /// Rows straight from the batch's text: no string copied per value.
    fn index_packed(&mut self, batch: &Packed<'_>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.rows(batch.entries(), |indexer, entry| {
            indexer.write_row(entry.id, entry.run_id, |at| entry.picked(at))
        })
    }
}

impl CsvIndexer {
    /// A row per entry, written by `write`; the entries it cannot write
    /// fail alone, and the file is flushed once for the batch.
    fn rows<E>(
        &mut self,
        entries: impl Iterator<Item = E>,
        mut write: impl FnMut(&mut Self, E) -> csv::Result<()>,
    ) -> Result<Vec<DocumentFailure>, BatchError> {
        let mut failures = Vec::new();
        for (index, entry) in entries.enumerate() {
            if let Err(e) = write(self, entry) {
                failures.push(failure(index, format!("cannot write row: {e}")));
            }
        }
        self.writer.flush().map_err(write_failed)?;
        Ok(failures)
    }

    /// One row, field by field into the writer's buffer (no row built
    /// aside): the id, the run id, and the values of picked field `at`.
    fn write_row<'e, V: AsRef<str> + 'e>(
        &mut self,
        id: &str,
        run_id: Option<&str>,
        picked: impl Fn(usize) -> &'e [V],
    ) -> csv::Result<()> {
        for column in &self.columns {
            match column {
                Column::Id => self.writer.write_field(id)?,
                Column::RunId => self.writer.write_field(run_id.unwrap_or_default())?,
                Column::Picked(at) => match picked(*at) {
                    [] => self.writer.write_field("")?,
                    [one] => self.writer.write_field(one.as_ref())?,
                    [first, rest @ ..] => {
                        self.joined.clear();
                        self.joined.push_str(first.as_ref());
                        for value in rest {
                            self.joined.push_str(&self.config.multi_value_separator);
                            self.joined.push_str(value.as_ref());
                        }
                        self.writer.write_field(&self.joined)?;
                    }
                },
            }
        }
        self.writer.write_record(None::<&[u8]>)
    }
}

weir_plugin::export_indexer!(CsvIndexer);
