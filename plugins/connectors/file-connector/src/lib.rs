//! file-connector: publish one document per JSONL line or CSV row.
//!
//! ```toml
//! [connectors.grants]
//! dirs = [{ host = "examples/data", guest = "/data" }]
//! [connectors.config]
//! paths = ["/data/books.jsonl", "/data/authors.csv"]
//! id_field = "isbn"
//! ```
//! The format comes from the extension (`.jsonl`, `.ndjson`, `.csv`) unless
//! `format` says. A document's id is its `id_field` value when present, else
//! `<file name>-<line number>`. A line that is not a JSON object, or a CSV row
//! with the wrong number of cells, fails the run with its file and line: a
//! silently skipped record would be a silently lost document.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue};

#[derive(serde::Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Format {
    Jsonl,
    Csv,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Files to read, in order, as the plugin sees them (inside granted dirs).
    paths: Vec<String>,
    format: Option<Format>,
    /// Field whose value becomes the document id.
    #[serde(default = "default_id_field")]
    id_field: String,
    /// Prefix added to every id (to keep ids of several sources apart).
    #[serde(default)]
    id_prefix: String,
    /// CSV delimiter, one byte.
    #[serde(default = "default_delimiter")]
    delimiter: char,
}

fn default_id_field() -> String {
    "id".into()
}

fn default_delimiter() -> char {
    ','
}

fn format_of(config: &Config, path: &str) -> Option<Format> {
    config.format.or_else(|| {
        match Path::new(path)
            .extension()?
            .to_str()?
            .to_ascii_lowercase()
            .as_str()
        {
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    })
}

struct FileConnector {
    config: Config,
}

fn fatal(path: &str, line: usize, message: impl std::fmt::Display) -> PluginError {
    PluginError::Fatal(format!("{path}:{line}: {message}"))
}

impl FileConnector {
    fn publish(
        &self,
        publisher: &Publisher,
        path: &str,
        line: usize,
        mut fields: Map<String, Json>,
    ) -> Result<(), PluginError> {
        let c = &self.config;
        let id = match fields.get(&c.id_field) {
            Some(Json::String(s)) if !s.is_empty() => s.clone(),
            Some(Json::Number(n)) => n.to_string(),
            _ => {
                let name = Path::new(path)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or(path);
                format!("{name}-{line}")
            }
        };
        if c.id_field != "id" {
            fields.shift_remove("id");
        }
        fields.shift_remove("run_id");
        fields.shift_remove("_children");
        fields.insert("id".into(), Json::String(format!("{}{id}", c.id_prefix)));
        let doc = Document::from_json(&Json::Object(fields).to_string())
            .map_err(|e| fatal(path, line, weir_plugin::field_error_message(&e)))?;
        publisher
            .publish(doc)
            .map_err(|e| fatal(path, line, format!("publish refused: {e}")))
    }

    fn read_jsonl(&self, publisher: &Publisher, path: &str) -> Result<(), PluginError> {
        let file = File::open(path).map_err(|e| fatal(path, 0, e))?;
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line_no = i + 1;
            let line = line.map_err(|e| fatal(path, line_no, e))?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(Json::Object(fields)) => self.publish(publisher, path, line_no, fields)?,
                Ok(_) => return Err(fatal(path, line_no, "a line must be a JSON object")),
                Err(e) => return Err(fatal(path, line_no, e)),
            }
        }
        Ok(())
    }

    fn read_csv(&self, publisher: &Publisher, path: &str) -> Result<(), PluginError> {
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(self.config.delimiter as u8)
            .from_path(path)
            .map_err(|e| fatal(path, 0, e))?;
        let headers = reader.headers().map_err(|e| fatal(path, 1, e))?.clone();
        for (i, record) in reader.records().enumerate() {
            let line_no = i + 2;
            let record = record.map_err(|e| fatal(path, line_no, e))?;
            let fields = headers
                .iter()
                .zip(record.iter())
                .map(|(h, v)| (h.to_owned(), Json::String(v.to_owned())))
                .collect();
            self.publish(publisher, path, line_no, fields)?;
        }
        Ok(())
    }
}

impl Connector for FileConnector {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.paths.is_empty() {
            issues.push(issue("paths", "needs at least one file"));
        }
        for (i, path) in config.paths.iter().enumerate() {
            if format_of(config, path).is_none() {
                issues.push(issue(
                    format!("paths[{i}]"),
                    format!(
                        "cannot tell the format of `{path}`: use .jsonl or .csv, or set `format`"
                    ),
                ));
            }
        }
        if !config.delimiter.is_ascii() {
            issues.push(issue("delimiter", "must be a single ASCII character"));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self { config })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        for path in &self.config.paths {
            weir_plugin::info!("reading {path}");
            match format_of(&self.config, path) {
                Some(Format::Jsonl) => self.read_jsonl(publisher, path)?,
                Some(Format::Csv) => self.read_csv(publisher, path)?,
                None => return Err(fatal(path, 0, "unknown format")),
            }
        }
        Ok(())
    }
}

weir_plugin::export_connector!(FileConnector);
