//! kafka-connector: Kafka records into documents, until the run stops
//! (`config.rs` says what a record becomes).

mod config;

use config::{Config, IdFrom, Tombstones, ValueKind};
use weir_plugin::messages::{self, Becomes, Message};
use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue};

struct Kafka {
    config: Config,
    /// `metadata_field` as a JSON key (`"kafka"`): a value holding it is not
    /// spliced.
    meta_key: String,
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

/// `text` as a JSON string into `out`.
fn push_str(out: &mut String, text: &str) {
    // A string always serializes.
    out.push_str(&serde_json::to_string(text).unwrap_or_default());
}

impl Kafka {
    /// The record's metadata as a JSON object, into `out`.
    fn metadata(message: &Message, out: &mut String) {
        use std::fmt::Write as _;
        let (topic, partition, offset) = parts(&message.origin);
        out.push_str("{\"topic\":");
        push_str(out, topic);
        let number = |n: Option<i64>| n.map_or_else(|| "null".to_owned(), |n| n.to_string());
        let _ = write!(
            out,
            ",\"partition\":{},\"offset\":{},\"key\":",
            number(partition),
            number(offset)
        );
        match &message.key {
            Some(key) => push_str(out, &String::from_utf8_lossy(key)),
            None => out.push_str("null"),
        }
        let _ = write!(
            out,
            ",\"timestamp_ms\":{},\"headers\":{{",
            number(message.timestamp_ms)
        );
        let mut seen: Vec<&str> = Vec::new();
        for (name, value) in &message.headers {
            if seen.contains(&name.as_str()) {
                continue;
            }
            if !seen.is_empty() {
                out.push(',');
            }
            seen.push(name);
            push_str(out, name);
            out.push(':');
            push_str(out, &String::from_utf8_lossy(value));
        }
        out.push_str("}}");
    }

    fn id(&self, message: &Message) -> String {
        match (self.config.id, &message.key) {
            (IdFrom::Key, Some(key)) if !key.is_empty() => lossy(key),
            _ => message.origin.clone(),
        }
    }

    /// What the record becomes, or why it is not a document.
    fn becomes(&self, message: &Message) -> Result<Becomes, String> {
        if message.body.is_empty() {
            return Ok(self.tombstone(message));
        }
        self.document(message).map(Becomes::Document)
    }

    /// A tombstone deletes the document of its key when ids are keys.
    fn tombstone(&self, message: &Message) -> Becomes {
        let keyed = self.config.id == IdFrom::Key && self.config.id_field.is_none();
        match &message.key {
            Some(key)
                if keyed && !key.is_empty() && self.config.tombstones == Tombstones::Delete =>
            {
                Becomes::Delete(lossy(key))
            }
            _ => Becomes::Nothing,
        }
    }

    /// The record's document, or why it is not one.
    fn document(&self, message: &Message) -> Result<Document, String> {
        let text = messages::text(message).ok_or("the record's value is not UTF-8 text")?;
        let meta = &self.config.metadata_field;
        let doc = match (self.config.value, &self.config.id_field) {
            (ValueKind::Json, None) => {
                let invalid = |e: weir_plugin::FieldError| {
                    format!(
                        "the record's value is not a JSON object: {}",
                        weir_plugin::field_error_message(&e)
                    )
                };
                // The metadata spliced into the object's text: one parse in
                // the host. A value holding the metadata's name already, or
                // not an object, goes the long way (and is refused there).
                let body = text.trim_end();
                let spliced = !meta.is_empty()
                    && text.trim_start().starts_with('{')
                    && body.ends_with('}')
                    && !text.contains(&self.meta_key);
                if spliced {
                    let inner = body[..body.len() - 1].trim_end();
                    let mut json = String::with_capacity(text.len() + 256);
                    json.push_str(inner);
                    if !inner.ends_with('{') {
                        json.push(',');
                    }
                    push_str(&mut json, meta);
                    json.push(':');
                    Self::metadata(message, &mut json);
                    json.push('}');
                    return Document::from_json_with_id(&self.id(message), &json).map_err(invalid);
                }
                Document::from_json_with_id(&self.id(message), text).map_err(invalid)?
            }
            (ValueKind::Json, Some(field)) => {
                let value: Map<String, Json> = serde_json::from_str(text)
                    .map_err(|e| format!("the record's value is not a JSON object: {e}"))?;
                let id = match value.get(field) {
                    Some(Json::String(s)) if !s.is_empty() => s.clone(),
                    Some(Json::Number(n)) => n.to_string(),
                    _ => {
                        return Err(format!("the record's value has no `{field}` to be its id"));
                    }
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
        if !meta.is_empty() {
            let mut json = String::with_capacity(256);
            Self::metadata(message, &mut json);
            doc.set_json(meta, &json)
                .map_err(|e| weir_plugin::field_error_message(&e))?;
        }
        Ok(doc)
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
        let meta_key = serde_json::to_string(&config.metadata_field).unwrap_or_default();
        Ok(Self { config, meta_key })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let source = self.config.source.clone();
        let (batch, wait, limit) = (
            self.config.batch,
            self.config.wait_ms,
            self.config.max_records,
        );
        messages::consume(publisher, &source, batch, wait, limit, |message| {
            self.becomes(message)
        })
    }
}

weir_plugin::export_streaming_connector!(Kafka);
