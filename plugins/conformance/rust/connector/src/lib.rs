//! The conformance connector in Rust (see `plugins/conformance/README.md`).

use weir_plugin::{Connector, Document, Outbox, PluginError, Publisher, doc_error};

/// How deep `deep_at`'s document nests: deeper than a document may be.
const TOO_DEEP: usize = 200;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    count: u64,
    #[serde(default = "default_prefix")]
    prefix: String,
    /// Publish through `publish-packed` (an [`Outbox`]).
    #[serde(default)]
    packed: bool,
    /// The document that nests too deep to be one.
    deep_at: Option<u64>,
    /// The document at which the connector fails, before publishing it.
    fail_at: Option<u64>,
}

fn default_prefix() -> String {
    "doc".into()
}

struct Conformance(Config);

impl Conformance {
    /// Document `i`'s fields as JSON text, so that `big` (beyond 64 bits)
    /// stays exact; an error at `fail_at`.
    fn fields(&self, i: u64) -> Result<String, PluginError> {
        if self.0.fail_at == Some(i) {
            return Err(PluginError::Fatal(format!(
                "configured to fail at {}-{i}",
                self.0.prefix
            )));
        }
        if self.0.deep_at == Some(i) {
            return Ok(format!(
                r#"{{"deep":{}1{}}}"#,
                "[".repeat(TOO_DEEP),
                "]".repeat(TOO_DEEP)
            ));
        }
        Ok(format!(
            r#"{{"n":{i},"neg":{neg},"big":{big},"half":{i}.5,"text":"ünï-😀-{i}","nested":{{"i":{i},"list":[{i},null,"x"]}},"none":null,"tags":["a","b"]}}"#,
            neg = -(i as i128) - 1,
            big = 18_446_744_073_709_551_616_u128 + u128::from(i),
        ))
    }

    fn publish_packed(&self, publisher: &Publisher) -> Result<(), PluginError> {
        let mut outbox = Outbox::new();
        let mut ids = Vec::new();
        let send = |outbox: &mut Outbox, ids: &mut Vec<String>| {
            let sent = outbox.send(publisher).map_err(|refusal| {
                PluginError::Fatal(format!("document `{}`: {refusal}", ids[refusal.at]))
            });
            ids.clear();
            sent
        };
        for i in 0..self.0.count {
            let id = format!("{}-{i}", self.0.prefix);
            let fields = match self.fields(i) {
                Ok(fields) => fields,
                Err(e) => {
                    // What came before the failure is published, as one by one.
                    send(&mut outbox, &mut ids)?;
                    return Err(e);
                }
            };
            outbox.push(&id, &fields);
            ids.push(id);
            if outbox.is_full() {
                send(&mut outbox, &mut ids)?;
            }
        }
        send(&mut outbox, &mut ids)
    }
}

impl Connector for Conformance {
    type Config = Config;

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self(config))
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        weir_plugin::progress::expect(publisher, self.0.count);
        if self.0.packed {
            return self.publish_packed(publisher);
        }
        for i in 0..self.0.count {
            let doc =
                Document::from_json_with_id(&format!("{}-{i}", self.0.prefix), &self.fields(i)?)
                    .map_err(doc_error)?;
            publisher.publish(doc).map_err(PluginError::Fatal)?;
        }
        Ok(())
    }
}

weir_plugin::export_connector!(Conformance);
