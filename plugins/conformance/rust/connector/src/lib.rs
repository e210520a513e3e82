//! The conformance connector in Rust (see `plugins/conformance/README.md`).

use weir_plugin::{Connector, Document, PluginError, Publisher, doc_error};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    count: u64,
    #[serde(default = "default_prefix")]
    prefix: String,
}

fn default_prefix() -> String {
    "doc".into()
}

struct Conformance(Config);

impl Connector for Conformance {
    type Config = Config;

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self(config))
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        for i in 0..self.0.count {
            // Built as JSON text so that `big` (beyond 64 bits) stays exact.
            let fields = format!(
                r#"{{"n":{i},"neg":{neg},"big":{big},"half":{i}.5,"text":"ünï-😀-{i}","nested":{{"i":{i},"list":[{i},null,"x"]}},"none":null,"tags":["a","b"]}}"#,
                neg = -(i as i128) - 1,
                big = 18_446_744_073_709_551_616_u128 + u128::from(i),
            );
            let doc = Document::from_json_with_id(&format!("{}-{i}", self.0.prefix), &fields)
                .map_err(doc_error)?;
            publisher.publish(doc).map_err(PluginError::Fatal)?;
        }
        Ok(())
    }
}

weir_plugin::export_connector!(Conformance);
