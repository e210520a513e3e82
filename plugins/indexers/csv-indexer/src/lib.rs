//! csv-indexer: write chosen fields of each document as a CSV row.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod sweep;

use std::fs::{File, OpenOptions};

use config::Config;
use weir_plugin::sweep::{SOURCE_FIELD, SYNC_FIELD, Sweep};
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
    path: String,
    columns: Vec<Column>,
    /// Where each sweep field is in `pick` (see `weir_plugin::sweep::PICKS`),
    /// when the indexer takes sweep markers.
    sweep_at: Option<[usize; 4]>,
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
/// With the sweep fields' places, when the indexer takes sweep markers.
fn layout(config: &Config) -> (Vec<Column>, Vec<String>, Option<[usize; 4]>) {
    let (layout, mut fields) = columns_of(&config.columns);
    let sweep_at =
        sweeps(config).then(|| weir_plugin::sweep::PICKS.map(|name| pick_of(&mut fields, name)));
    (layout, fields, sweep_at)
}

/// Where field `name` is picked, added when it is not yet: the host takes
/// each field once.
fn pick_of(fields: &mut Vec<String>, name: &str) -> usize {
    fields.iter().position(|f| f == name).unwrap_or_else(|| {
        fields.push(name.to_owned());
        fields.len() - 1
    })
}

/// Whether the indexer takes sweep markers: its columns hold what a sweep
/// reads, or its file holds only this run's rows (emptied at start), so
/// that after a complete full sync it is already the source's.
fn sweeps(config: &Config) -> bool {
    config.truncate_at_start || stamped(config)
}

/// Whether the columns hold what a sweep reads.
fn stamped(config: &Config) -> bool {
    [SOURCE_FIELD, SYNC_FIELD]
        .iter()
        .all(|name| config.columns.iter().any(|c| c == name))
}

fn columns_of(columns: &[String]) -> (Vec<Column>, Vec<String>) {
    let mut fields = Vec::new();
    let layout = columns
        .iter()
        .map(|column| match column.as_str() {
            "id" => Column::Id,
            "run_id" => Column::RunId,
            field => Column::Picked(pick_of(&mut fields, field)),
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
        let mut issues = Vec::new();
        if config.columns.is_empty() {
            issues.push(issue("columns", "needs at least one column"));
        }
        if !config.append {
            issues.push(issue(
                "append",
                "`append = false` would empty the file at every start, so an incremental run \
                 would leave only what it changed: remove it (files are appended to, and full \
                 syncs clean up when `columns` hold `_weir_source` and `_weir_sync`), or set \
                 `truncate_at_start = true` to start every run from an empty file",
            ));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let path = weir_plugin::instance_path(&config.path)?;
        let writer = open(&path, &config, config.truncate_at_start)?;
        let (columns, _, sweep_at) = layout(&config);
        Ok(Self {
            sweep_at,
            config,
            path,
            columns,
            writer,
            joined: String::new(),
        })
    }

    fn batch_format(&self) -> BatchFormat {
        picked(layout(&self.config).1)
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.rows(batch.iter(), |indexer, entry| {
            let picked = |at: usize| entry.picked.get(at).map_or(&[][..], Vec::as_slice);
            if let Some(sweep) = indexer.sweep_at.and_then(|at| {
                Sweep::from_picked(&entry.id, |i| {
                    entry
                        .picked
                        .get(at[i])
                        .and_then(|v| v.first())
                        .map(String::as_str)
                })
            }) {
                return Row::Sweep(sweep);
            }
            Row::Written(indexer.write_row(&entry.id, entry.run_id.as_deref(), picked))
        })
    }

    /// Rows straight from the batch's text: no string copied per value.
    fn index_packed(&mut self, batch: &Packed<'_>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.rows(batch.entries(), |indexer, entry| {
            if let Some(sweep) = indexer.sweep_at.and_then(|at| {
                Sweep::from_picked(entry.id, |i| entry.picked(at[i]).first().copied())
            }) {
                return Row::Sweep(sweep);
            }
            Row::Written(indexer.write_row(entry.id, entry.run_id, |at| entry.picked(at)))
        })
    }
}

/// What became of an entry: a row written (or not), or a sweep to make.
enum Row {
    Written(csv::Result<()>),
    Sweep(Result<Sweep, String>),
}

/// The writer of `path`: emptied when `truncate`, a header written
/// when it is empty, and an existing header checked against the columns.
fn open(path: &str, config: &Config, truncate: bool) -> Result<csv::Writer<File>, String> {
    let existing = match truncate {
        true => None,
        false => sweep::header(path)?,
    };
    if let Some(header) = &existing
        && header != &config.columns
    {
        return Err(format!(
            "{path} starts with the header {header:?}, not the `columns` {:?}: rows would not \
             line up; write to another file, or set `truncate_at_start = true` to empty it",
            config.columns
        ));
    }
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(!truncate)
        .truncate(truncate)
        .open(path)
        .map_err(|e| format!("cannot open {path}: {e}"))?;
    let mut writer = csv::WriterBuilder::new()
        .buffer_capacity(WRITE_BUFFER)
        .from_writer(file);
    if existing.is_none() {
        writer
            .write_record(&config.columns)
            .map_err(|e| e.to_string())?;
        writer.flush().map_err(|e| e.to_string())?;
    }
    Ok(writer)
}

impl CsvIndexer {
    /// A row per entry, written by `write`; the entries it cannot write
    /// fail alone, and the file is flushed once for the batch.
    fn rows<E>(
        &mut self,
        entries: impl Iterator<Item = E>,
        mut write: impl FnMut(&mut Self, E) -> Row,
    ) -> Result<Vec<DocumentFailure>, BatchError> {
        let mut failures = Vec::new();
        for (index, entry) in entries.enumerate() {
            match write(self, entry) {
                Row::Written(Ok(())) => {}
                Row::Written(Err(e)) => {
                    failures.push(failure(index, format!("cannot write row: {e}")));
                }
                Row::Sweep(sweep) => {
                    self.writer.flush().map_err(write_failed)?;
                    if let Err(message) = sweep.and_then(|sweep| self.sweep(&sweep)) {
                        failures.push(failure(index, message));
                    }
                }
            }
        }
        self.writer.flush().map_err(write_failed)?;
        Ok(failures)
    }

    fn sweep(&mut self, sweep: &Sweep) -> Result<(), String> {
        if !stamped(&self.config) {
            // `truncate_at_start` (see `sweeps`).
            weir_plugin::debug!(
                "sweep of `{}`: {} was emptied at start, so it holds only this run's rows",
                sweep.source,
                self.path
            );
            return Ok(());
        }
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
        self.writer = open(&self.path, &self.config, false)?;
        weir_plugin::info!(
            "swept {}: {} of {} rows of `{}` older than generation {} deleted; {} rows kept of {}",
            self.path,
            swept.deleted,
            swept.of_source,
            sweep.source,
            sweep.generation,
            swept.rows_after,
            swept.rows_before
        );
        Ok(())
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
