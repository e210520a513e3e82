//! csv-indexer: write chosen fields of each document as a CSV row.
//!
//! ```toml
//! [indexer.config]
//! path = "/out/documents.csv"
//! columns = ["id", "title", "author"]
//! ```
//! Column `id` is the document id; `run_id` its run id; any other column is
//! the field's values as text, joined with `multi_value_separator` (`|`).
//! A header row is written when the file is created.

use std::fs::{File, OpenOptions};

use weir_plugin::{
    BatchError, ConfigIssue, Document, DocumentFailure, Indexer, PluginError, issue,
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

fn batch_error(e: impl std::fmt::Display) -> BatchError {
    BatchError {
        message: format!("write failed: {e}"),
        status: None,
        connection_failed: false,
    }
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
        let exists = std::fs::metadata(&config.path).is_ok_and(|m| m.len() > 0);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(config.append)
            .truncate(!config.append)
            .open(&config.path)
            .map_err(|e| format!("cannot open {}: {e}", config.path))?;
        let mut writer = csv::Writer::from_writer(file);
        if !(config.append && exists) {
            writer
                .write_record(&config.columns)
                .map_err(|e| e.to_string())?;
            writer.flush().map_err(|e| e.to_string())?;
        }
        Ok(Self { config, writer })
    }

    fn add_document(&mut self, doc: &Document) -> Result<(), PluginError> {
        let row: Vec<String> = self
            .config
            .columns
            .iter()
            .map(|c| match c.as_str() {
                "id" => doc.id(),
                "run_id" => doc.run_id().unwrap_or_default(),
                field => doc
                    .get_strings(field)
                    .join(&self.config.multi_value_separator),
            })
            .collect();
        self.writer
            .write_record(&row)
            .map_err(|e| PluginError::Document(format!("cannot write row: {e}")))
    }

    fn send_batch(&mut self) -> Result<Vec<DocumentFailure>, BatchError> {
        self.writer.flush().map_err(batch_error)?;
        Ok(Vec::new())
    }
}

weir_plugin::export_indexer!(CsvIndexer);
