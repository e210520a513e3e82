//! noop-stage: does nothing. Measures the cost of a stage call.

use weir_plugin::{Document, PluginError, Stage};

struct Noop;

impl Stage for Noop {
    type Config = weir_plugin::serde_json::Value;

    fn start(_: Self::Config) -> Result<Self, String> {
        Ok(Noop)
    }

    fn process(&mut self, _doc: &Document) -> Result<Vec<Document>, PluginError> {
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(Noop);
