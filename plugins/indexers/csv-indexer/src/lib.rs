//! csv-indexer: write chosen fields of each document as a CSV row.
//!
//! ```toml
//! [indexer.config]
//! path = "/out/documents.csv"
//! columns = ["id", "title", "author"]
//! ```
//! Column `id` is the document id; `run_id` its run id; any other column is
//! the field's values as text, joined with `multi_value_separator` (`|`).
//! A header row is written when the file is created. With several indexer
//! instances (`indexer.instances`), `path` holds `{instance}`: each writes its own file.

use std::fs::{File, OpenOptions};

use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, ConfigIssue, DocumentFailure, Indexer, failure, issue,
    picked,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    path: String,
    columns: Vec<String>,
    #[serde(default)]
    append: bool,
    #[serde(default = "default_separator")]
    multi_value_separator: String,
}

fn default_separator() -> String {
    "|".into()
}

struct CsvIndexer {
    config: Config,
    writer: csv::Writer<File>,
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
        let mut writer = csv::Writer::from_writer(file);
        if !(config.append && exists) {
            writer
                .write_record(&config.columns)
                .map_err(|e| e.to_string())?;
            writer.flush().map_err(|e| e.to_string())?;
        }
        Ok(Self { config, writer })
    }

    fn batch_format(&self) -> BatchFormat {
        picked(self.config.columns.clone())
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        let mut failures = Vec::new();
        for (index, entry) in batch.into_iter().enumerate() {
            let row: Vec<String> = self
                .config
                .columns
                .iter()
                .zip(entry.picked)
                .map(|(column, values)| match column.as_str() {
                    "id" => entry.id.clone(),
                    "run_id" => entry.run_id.clone().unwrap_or_default(),
                    _ => values.join(&self.config.multi_value_separator),
                })
                .collect();
            if let Err(e) = self.writer.write_record(&row) {
                failures.push(failure(index, format!("cannot write row: {e}")));
            }
        }
        self.writer.flush().map_err(write_failed)?;
        Ok(failures)
    }
}

weir_plugin::export_indexer!(CsvIndexer);
