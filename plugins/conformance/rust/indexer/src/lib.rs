//! The conformance indexer in Rust (see `plugins/conformance/README.md`).

use std::fs::File;
use std::io::Write;

use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, DocumentFailure, Indexer, PluginError, batch_error,
    failure,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    path: String,
}

struct Conformance {
    file: Option<File>,
}

impl Indexer for Conformance {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        let file =
            File::create(&config.path).map_err(|e| format!("cannot open {}: {e}", config.path))?;
        Ok(Self { file: Some(file) })
    }

    fn batch_format(&self) -> BatchFormat {
        BatchFormat {
            pick: vec!["reject".into(), "busy".into()],
            ..weir_plugin::whole_json()
        }
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        let file = self.file.as_mut().ok_or_else(|| batch_error("closed"))?;
        let mut failures = Vec::new();
        let mut lines = String::new();
        for (index, entry) in batch.into_iter().enumerate() {
            let is_true = |values: &Vec<String>| values.first().is_some_and(|v| v == "true");
            if is_true(&entry.picked[0]) {
                failures.push(failure(index, format!("rejected {}", entry.id)));
            } else if is_true(&entry.picked[1]) {
                failures.push(DocumentFailure {
                    status: Some(503),
                    transient: true,
                    ..failure(index, format!("busy {}", entry.id))
                });
            } else {
                lines.push_str(entry.json.as_deref().unwrap_or_default());
                lines.push('\n');
            }
        }
        file.write_all(lines.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| batch_error(format!("write failed: {e}")))?;
        Ok(failures)
    }

    fn close(&mut self) -> Result<(), PluginError> {
        self.file = None;
        Ok(())
    }
}

weir_plugin::export_indexer!(Conformance);
