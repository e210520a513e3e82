//! nop-indexer: takes every batch and sends it nowhere. For measuring a
//! pipeline without a backend, or for runs whose stages are the point.
//!
//! ```toml
//! [indexer.config]
//! json = true   # have the host render each document as JSON, as a real backend would
//! ```

use weir_plugin::{BatchEntry, BatchError, BatchFormat, DocumentFailure, Indexer};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    json: bool,
}

struct Nop(BatchFormat);

impl Indexer for Nop {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(if config.json {
            weir_plugin::whole_json()
        } else {
            weir_plugin::picked(Vec::new())
        }))
    }

    fn batch_format(&self) -> BatchFormat {
        self.0.clone()
    }

    fn index_batch(&mut self, _batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        Ok(Vec::new())
    }
}

weir_plugin::export_indexer!(Nop);
