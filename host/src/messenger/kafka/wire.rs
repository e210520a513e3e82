//! What travels on the topics besides documents: dead-letter headers,
//! batched events, and how a message that is not a document is handled.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::Rebalance;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::ThreadedProducer;

use super::delivery::{Deliveries, Tag, produce};
use super::{KafkaTopics, transport};
use crate::document::Document;
use crate::event::Event;
use crate::messenger::{Failure, MessengerError};

/// A poll's error: transient ones (a topic not created yet, a broker
/// restarting) are logged and the poll counts as idle; fatal ones stop.
pub(super) fn poll_error(e: KafkaError) -> Result<(), MessengerError> {
    match e {
        KafkaError::MessageConsumption(code) => {
            tracing::warn!(error = %code, "Kafka consumer reported an error; continuing");
            std::thread::sleep(Duration::from_millis(100));
            Ok(())
        }
        fatal => Err(transport(fatal)),
    }
}

/// A dead letter for a message that is not a Weir document: its key, its
/// bytes as they came, and headers saying why and where it came from.
pub(super) fn undecodable(
    message: &rdkafka::message::BorrowedMessage<'_>,
    error: &str,
    topic: &str,
) -> (String, Vec<u8>, OwnedHeaders) {
    let failure = Failure {
        plugin: "kafka".into(),
        message: format!("not a Weir document: {error}"),
        attempts: 1,
    };
    let headers = dead_letter_headers(
        &failure,
        Some((topic, message.partition(), message.offset())),
    );
    let key = message
        .key()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .unwrap_or_default();
    (key, message.payload().unwrap_or_default().to_vec(), headers)
}

pub(super) fn document_from(payload: Option<&[u8]>) -> Result<Document, String> {
    let text = std::str::from_utf8(payload.unwrap_or_default()).map_err(|e| e.to_string())?;
    Document::from_json_str(text).map_err(|e| e.to_string())
}

pub(super) fn millis_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(super) fn dead_letter_headers(
    failure: &Failure,
    source: Option<(&str, i32, i64)>,
) -> OwnedHeaders {
    let attempts = failure.attempts.to_string();
    let time = millis_now().to_string();
    let mut headers = OwnedHeaders::new()
        .insert(Header {
            key: "weir.error",
            value: Some(failure.message.as_bytes()),
        })
        .insert(Header {
            key: "weir.plugin",
            value: Some(failure.plugin.as_bytes()),
        })
        .insert(Header {
            key: "weir.attempts",
            value: Some(attempts.as_bytes()),
        })
        .insert(Header {
            key: "weir.time_ms",
            value: Some(time.as_bytes()),
        });
    if let Some((topic, partition, offset)) = source {
        let (partition, offset) = (partition.to_string(), offset.to_string());
        headers = headers
            .insert(Header {
                key: "weir.source_topic",
                value: Some(topic.as_bytes()),
            })
            .insert(Header {
                key: "weir.source_partition",
                value: Some(partition.as_bytes()),
            })
            .insert(Header {
                key: "weir.source_offset",
                value: Some(offset.as_bytes()),
            });
    }
    headers
}

/// Events waiting to be sent, per topic: a batch of them travels as one
/// message (a JSON array), instead of one message per document.
#[derive(Debug, Default)]
pub(super) struct EventBuffer(BTreeMap<String, Vec<Event>>);

impl EventBuffer {
    /// Keep `event` for the topic it goes to, if it goes anywhere.
    pub(super) fn push(&mut self, topics: &KafkaTopics, event: Event) {
        if let Some(topic) = topics.events(event.run_id.as_deref()) {
            self.0.entry(topic).or_default().push(event);
        }
    }

    /// Produce each topic's events as one message (a JSON array), accounted
    /// against `tag`.
    pub(super) fn send(
        &mut self,
        producer: &ThreadedProducer<Deliveries>,
        tag: Tag,
    ) -> Result<(), MessengerError> {
        for (topic, events) in std::mem::take(&mut self.0) {
            let key = events
                .first()
                .map(|e| e.document_id.clone())
                .unwrap_or_default();
            let payload = serde_json::to_vec(&events).map_err(transport)?;
            produce(producer, &topic, &key, &payload, None, tag)?;
        }
        Ok(())
    }
}

/// Events from one event message: a JSON array, or a single event object.
pub(super) fn events_from(payload: &[u8]) -> Result<Vec<Event>, serde_json::Error> {
    if payload.first() == Some(&b'[') {
        serde_json::from_slice(payload)
    } else {
        serde_json::from_slice(payload).map(|e| vec![e])
    }
}

/// Log a rebalance's outcome: which partitions this consumer now owns.
pub(super) fn log_assignment(role: &str, rebalance: &Rebalance<'_>) {
    if let Rebalance::Assign(assigned) = rebalance {
        let partitions: Vec<i32> = assigned.elements().iter().map(|e| e.partition()).collect();
        tracing::info!(role, ?partitions, "partitions assigned");
    }
}
