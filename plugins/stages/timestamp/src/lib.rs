//! timestamp: write the time a document passed this stage, RFC 3339 in UTC.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use chrono::{SecondsFormat, Utc};
use config::{Config, Precision};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, issue, update_batch,
};

struct Timestamp {
    config: Config,
    names: Vec<String>,
}

impl BatchStage for Timestamp {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        if config.field.is_empty() {
            return vec![issue("field", "must name a field")];
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        let names = if config.overwrite {
            Vec::new()
        } else {
            vec![config.field.clone()]
        };
        Ok(Self { config, names })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let format = match self.config.precision {
            Precision::Seconds => SecondsFormat::Secs,
            Precision::Milliseconds => SecondsFormat::Millis,
            Precision::Microseconds => SecondsFormat::Micros,
        };
        let now = Utc::now().to_rfc3339_opts(format, true);
        let field = self.config.field.as_str();
        Ok(update_batch(docs, &self.names, |_, answers| {
            if answers.first().is_some_and(Option::is_some) {
                return (Vec::new(), Ok(()));
            }
            (vec![FieldChange::set_string(field, now.as_str())], Ok(()))
        }))
    }
}

weir_plugin::export_batch_stage!(Timestamp);
