//! kafka-connector: Kafka records into documents, until the run stops
//! (`config.rs` says what a record becomes).

mod config;

use config::{Config, IdFrom, ValueKind};
use weir_plugin::messages::{self, Message};
use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue};

struct Kafka {
    config: Config,
}

/// `origin` (`topic/partition/offset`) in its parts.
fn parts(origin: &str) -> (&str, Option<i64>, Option<i64>) {
    let mut it = origin.rsplitn(3, '/');
    let offset = it.next().and_then(|o| o.parse().ok());
    let partition = it.next().and_then(|p| p.parse().ok());
    (it.next().unwrap_or(origin), partition, offset)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Kafka {
    /// The record's metadata, as JSON text.
    fn metadata(message: &Message) -> String {
        let (topic, partition, offset) = parts(&message.origin);
        let mut headers = Map::new();
        for (name, value) in &message.headers {
            headers
                .entry(name.clone())
                .or_insert_with(|| Json::String(lossy(value)));
        }
        serde_json::json!({
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "key": message.key.as_deref().map(lossy),
            "timestamp_ms": message.timestamp_ms,
            "headers": headers,
        })
        .to_string()
    }

    fn id(&self, message: &Message) -> String {
        match (self.config.id, &message.key) {
            (IdFrom::Key, Some(key)) if !key.is_empty() => lossy(key),
            _ => message.origin.clone(),
        }
    }

    /// The record's document, or why it is not one (`None`: a tombstone).
    fn document(&self, message: &Message) -> Result<Option<Document>, String> {
        if message.body.is_empty() {
            return Ok(None);
        }
        let text = messages::text(message).ok_or("the record's value is not UTF-8 text")?;
        let doc = match (self.config.value, &self.config.id_field) {
            (ValueKind::Json, None) => Document::from_json_with_id(&self.id(message), text)
                .map_err(|e| {
                    format!(
                        "the record's value is not a JSON object: {}",
                        weir_plugin::field_error_message(&e)
                    )
                })?,
            (ValueKind::Json, Some(field)) => {
                let value: Map<String, Json> = serde_json::from_str(text)
                    .map_err(|e| format!("the record's value is not a JSON object: {e}"))?;
                let id = match value.get(field) {
                    Some(Json::String(s)) if !s.is_empty() => s.clone(),
                    Some(Json::Number(n)) => n.to_string(),
                    _ => return Err(format!("the record's value has no `{field}` to be its id")),
                };
                Document::from_json_with_id(&id, text).map_err(|e| {
                    format!(
                        "the record's value cannot be a document: {}",
                        weir_plugin::field_error_message(&e)
                    )
                })?
            }
            (ValueKind::Text, _) => {
                let doc = Document::new(&self.id(message));
                doc.set_string(&self.config.text_field, text)
                    .map_err(|e| weir_plugin::field_error_message(&e))?;
                doc
            }
        };
        if !self.config.metadata_field.is_empty() {
            doc.set_json(&self.config.metadata_field, &Self::metadata(message))
                .map_err(|e| weir_plugin::field_error_message(&e))?;
        }
        Ok(Some(doc))
    }
}

impl Connector for Kafka {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.source.is_empty() {
            issues.push(issue(
                "source",
                "name the source of the connector's grants.kafka",
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
        let (source, batch, wait) = (
            self.config.source.clone(),
            self.config.batch,
            self.config.wait_ms,
        );
        let mut left = self.config.max_records.unwrap_or(u64::MAX);
        while left > 0 {
            let max = u32::try_from(left.min(u64::from(batch))).unwrap_or(batch);
            let Some(records) = messages::receive(&source, max, wait)? else {
                break;
            };
            left -= records.len() as u64;
            for message in records {
                match self.document(&message) {
                    Ok(Some(doc)) => {
                        messages::publish(publisher, &message, doc)?;
                        messages::finish(&message);
                    }
                    Ok(None) => messages::finish(&message),
                    Err(why) => messages::reject(&message, &why),
                }
            }
        }
        Ok(())
    }
}

weir_plugin::export_streaming_connector!(Kafka);
