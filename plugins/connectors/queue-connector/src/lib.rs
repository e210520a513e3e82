//! queue-connector: queue messages into documents, until the run stops
//! (`config.rs` says what a message becomes).

mod config;

use config::{Config, ValueKind};
use weir_plugin::messages::{self, Becomes, Message};
use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue};

struct Queue {
    config: Config,
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// FNV-1a, 64 bits: the same body gives the same id on every delivery.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Queue {
    /// The message's metadata, as JSON text.
    fn metadata(message: &Message) -> String {
        let mut headers = Map::new();
        for (name, value) in &message.headers {
            headers
                .entry(name.clone())
                .or_insert_with(|| Json::String(lossy(value)));
        }
        serde_json::json!({
            "queue": message.origin,
            "message_id": message.key.as_deref().map(lossy),
            "timestamp_ms": message.timestamp_ms,
            "headers": headers,
            "attempt": message.attempt,
        })
        .to_string()
    }

    /// Its message id, else the queue and a digest of its body.
    fn id(message: &Message) -> String {
        match &message.key {
            Some(key) if !key.is_empty() => lossy(key),
            _ => format!("{}/{:016x}", message.origin, digest(&message.body)),
        }
    }

    /// What the message becomes (nothing when it has no body), or why it
    /// is not a document.
    fn document(&self, message: &Message) -> Result<Becomes, String> {
        if message.body.is_empty() {
            return Ok(Becomes::Nothing);
        }
        let text = messages::text(message).ok_or("the message's body is not UTF-8 text")?;
        let doc = match (self.config.value, &self.config.id_field) {
            (ValueKind::Json, None) => Document::from_json_with_id(&Self::id(message), text)
                .map_err(|e| {
                    format!(
                        "the message's body is not a JSON object: {}",
                        weir_plugin::field_error_message(&e)
                    )
                })?,
            (ValueKind::Json, Some(field)) => {
                let value: Map<String, Json> = serde_json::from_str(text)
                    .map_err(|e| format!("the message's body is not a JSON object: {e}"))?;
                let id = match value.get(field) {
                    Some(Json::String(s)) if !s.is_empty() => s.clone(),
                    Some(Json::Number(n)) => n.to_string(),
                    _ => return Err(format!("the message's body has no `{field}` to be its id")),
                };
                Document::from_json_with_id(&id, text).map_err(|e| {
                    format!(
                        "the message's body cannot be a document: {}",
                        weir_plugin::field_error_message(&e)
                    )
                })?
            }
            (ValueKind::Text, _) => {
                let doc = Document::new(&Self::id(message));
                doc.set_string(&self.config.text_field, text)
                    .map_err(|e| weir_plugin::field_error_message(&e))?;
                doc
            }
        };
        if !self.config.metadata_field.is_empty() {
            doc.set_json(&self.config.metadata_field, &Self::metadata(message))
                .map_err(|e| weir_plugin::field_error_message(&e))?;
        }
        Ok(Becomes::Document(doc))
    }
}

impl Connector for Queue {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.source.is_empty() {
            issues.push(issue(
                "source",
                "name the source of the connector's grants.queues",
            ));
        }
        if !(1..=messages::MAX_RECEIVE).contains(&config.batch) {
            issues.push(issue("batch", "must be 1 to 4096"));
        }
        if config.value == ValueKind::Text && config.text_field.is_empty() {
            issues.push(issue("text_field", "cannot be empty"));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self { config })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let source = self.config.source.clone();
        let (batch, wait, limit) = (
            self.config.batch,
            self.config.wait_ms,
            self.config.max_messages,
        );
        messages::consume(publisher, &source, batch, wait, limit, |message| {
            self.document(message)
        })
    }
}

weir_plugin::export_streaming_connector!(Queue);
