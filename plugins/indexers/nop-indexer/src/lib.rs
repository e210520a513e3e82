//! nop-indexer: take every batch and send it nowhere.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::{BatchEntry, BatchError, BatchFormat, DocumentFailure, Indexer};

struct Nop(BatchFormat);

impl Indexer for Nop {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        // Deletion markers too: it takes everything.
        let pick = vec![weir_plugin::DELETED_FIELD.to_owned()];
        Ok(Self(if config.json {
            BatchFormat {
                pick,
                ..weir_plugin::whole_json()
            }
        } else {
            weir_plugin::picked(pick)
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
