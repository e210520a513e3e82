//! noop-stage: does nothing. Measures the cost of a stage call.
//!
//! With `pull_json = true` it reads the whole document's JSON into its memory
//! (`to-json`), as an indexer did for each document under contract 0.1: the
//! indexer benchmark compares that with the batch the host prepares now.

use weir_plugin::{Document, PluginError, Stage};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    pull_json: bool,
}

struct Noop {
    pull_json: bool,
    /// Bytes pulled, so the pull is not optimized away.
    pulled: usize,
}

impl Stage for Noop {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Noop {
            pull_json: config.pull_json,
            pulled: 0,
        })
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        if self.pull_json {
            self.pulled = self.pulled.wrapping_add(doc.to_json().len());
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(Noop);
