//! What travels on the topics besides documents: dead-letter headers,
//! batched events, and how a message that is not a document is handled.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use rdkafka::consumer::Rebalance;
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::ThreadedProducer;

use super::delivery::{Deliveries, Tag, produce, produce_events};
use super::fence::Place;
use super::{KafkaTopics, transport};
use crate::core::document::{Document, FieldError};
use crate::core::event::{Event, EventKind};
use crate::messenger::{Failure, MessengerError};

/// The header naming a message's run, so that even a message that is not a
/// document can be failed in the right run.
const RUN_ID: &str = "weir.run_id";
/// The headers tying a document to the worker pass that made it (see
/// [`Event::attempt`]).
const ATTEMPT: &str = "weir.attempt";
const AFTER_CREATES: &str = "weir.after_creates";
/// The source record a worker made a document from (`partition:offset`),
/// for the indexer's fence against late copies (see [`super::fence`]).
const ORIGIN: &str = "weir.origin";

/// Headers for a document of `run_id` made in pass `lineage`.
pub(super) fn document_headers(run_id: Option<&str>, lineage: Option<Lineage>) -> OwnedHeaders {
    let mut headers = OwnedHeaders::new();
    if let Some(run_id) = run_id {
        headers = headers.insert(Header {
            key: RUN_ID,
            value: Some(run_id.as_bytes()),
        });
    }
    if let Some(Lineage {
        attempt,
        after_creates,
    }) = lineage
    {
        let (attempt, after) = (attempt.to_string(), after_creates.to_string());
        headers = headers
            .insert(Header {
                key: ATTEMPT,
                value: Some(attempt.as_bytes()),
            })
            .insert(Header {
                key: AFTER_CREATES,
                value: Some(after.as_bytes()),
            });
    }
    headers
}

fn header<'a>(message: &'a BorrowedMessage<'_>, key: &str) -> Option<&'a str> {
    let headers = message.headers()?;
    headers
        .iter()
        .find(|h| h.key == key)
        .and_then(|h| std::str::from_utf8(h.value?).ok())
}

/// `headers` with the source record a document was made from.
pub(super) fn with_origin(headers: OwnedHeaders, place: Place) -> OwnedHeaders {
    headers.insert(Header {
        key: ORIGIN,
        value: Some(place.to_header().as_bytes()),
    })
}

/// The source record a document was made from, from its header.
pub(super) fn origin_of(message: &BorrowedMessage<'_>) -> Option<Place> {
    header(message, ORIGIN).and_then(Place::parse)
}

/// The run a message belongs to, from its header.
pub(super) fn run_id_of(message: &BorrowedMessage<'_>) -> Option<String> {
    header(message, RUN_ID).map(str::to_owned)
}

/// The worker pass that made a document, from its headers.
pub(super) fn lineage_of(message: &BorrowedMessage<'_>) -> Option<Lineage> {
    Some(Lineage {
        attempt: header(message, ATTEMPT)?.parse().ok()?,
        after_creates: header(message, AFTER_CREATES)?.parse().ok()?,
    })
}

/// A worker's pass over one source record that created children, and how
/// many CREATE events it had sent before a given output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lineage {
    pub(super) attempt: u64,
    pub(super) after_creates: u32,
}

/// A worker's current pass: numbers its CREATE events, and tells the
/// lineage of each document it sends on.
#[derive(Debug, Default)]
pub(super) struct Pass {
    attempt: u64,
    creates: u32,
}

impl Pass {
    /// A new source record is being processed.
    pub(super) fn start(&mut self) {
        self.attempt = fastrand::u64(..);
        self.creates = 0;
    }

    /// Tag a CREATE event with the pass; other events pass unchanged.
    pub(super) fn stamp(&mut self, event: &mut Event) {
        if event.kind == EventKind::Create {
            event.attempt = Some(self.attempt);
            self.creates += 1;
        }
    }

    /// What a document sent now carries: none when the pass created nothing.
    pub(super) fn lineage(&self) -> Option<Lineage> {
        (self.creates > 0).then_some(Lineage {
            attempt: self.attempt,
            after_creates: self.creates,
        })
    }
}

/// An indexer's view of the documents it polled since its last batch: the
/// lineage of those that have one, so that their terminal events carry it.
#[derive(Debug, Default)]
pub(super) struct Lineages(foldhash::HashMap<String, std::collections::VecDeque<Lineage>>);

impl Lineages {
    pub(super) fn polled(&mut self, id: &str, lineage: Option<Lineage>) {
        if let Some(lineage) = lineage {
            self.0.entry(id.to_owned()).or_default().push_back(lineage);
        }
    }

    /// Give a terminal event its document's lineage.
    pub(super) fn stamp(&mut self, event: &mut Event) {
        if !event.kind.is_terminal() {
            return;
        }
        if let Some(queue) = self.0.get_mut(&event.document_id)
            && let Some(lineage) = queue.pop_front()
        {
            event.attempt = Some(lineage.attempt);
            event.after_creates = lineage.after_creates;
        }
    }

    /// The batch is done.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}

/// A FAIL event for a message that is not a document, when its run and id
/// can be known (the key is the id).
pub(super) fn undecodable_event(
    message: &BorrowedMessage<'_>,
    error: &NotADocument,
) -> Option<Event> {
    fail_event(message, format!("not a Weir document: {error}"))
}

/// A FAIL for the document of `message` (its key is the id), in its run.
pub(super) fn fail_event(message: &BorrowedMessage<'_>, why: String) -> Option<Event> {
    let id = std::str::from_utf8(message.key()?).ok()?;
    Some(Event {
        document_id: id.to_owned(),
        run_id: run_id_of(message),
        kind: EventKind::Fail,
        message: Some(why),
        attempt: None,
        after_creates: 0,
        root: None,
        stage: None,
    })
}

/// Dead-letter `doc` (or, when too large, its id) with `failure`, naming
/// the record it came from; accounted against `tag`.
pub(super) fn dead_letter(
    producer: &ThreadedProducer<Deliveries>,
    topics: &KafkaTopics,
    doc: &Document,
    failure: &Failure,
    source: Option<(&str, i32, i64)>,
    tag: Tag,
) -> Result<(), MessengerError> {
    let headers = dead_letter_headers(failure, source, doc.run_id());
    let body = topics.dead_letter_body(doc);
    produce(
        producer,
        &topics.fail(),
        doc.id(),
        &body,
        Some(headers),
        tag,
    )
}

/// Why a document of `json_bytes` fails: too large for the topics.
pub(super) fn too_large(topics: &KafkaTopics, json_bytes: usize) -> Failure {
    Failure {
        plugin: "kafka".into(),
        message: format!(
            "the document is {json_bytes} bytes, over the message limit of {} bytes (kafka.max_message_bytes, or the broker's)",
            topics.message_limit()
        ),
        attempts: 1,
        reason: None,
    }
}

/// A dead letter for a message that is not a Weir document: its key, its
/// bytes as they came, and headers saying why and where it came from.
pub(super) fn undecodable(
    message: &BorrowedMessage<'_>,
    error: &NotADocument,
    topic: &str,
) -> (String, Vec<u8>, OwnedHeaders) {
    let failure = Failure {
        plugin: "kafka".into(),
        message: format!("not a Weir document: {error}"),
        attempts: 1,
        reason: None,
    };
    raw_dead_letter(message, &failure, topic)
}

/// A dead letter of `message` as it came (key, bytes), with headers saying
/// why (`failure`) and where it came from.
pub(super) fn raw_dead_letter(
    message: &BorrowedMessage<'_>,
    failure: &Failure,
    topic: &str,
) -> (String, Vec<u8>, OwnedHeaders) {
    let headers = dead_letter_headers(
        failure,
        Some((topic, message.partition(), message.offset())),
        header(message, RUN_ID),
    );
    let key = message
        .key()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .unwrap_or_default();
    (key, message.payload().unwrap_or_default().to_vec(), headers)
}

/// Why a message's payload is not a Weir document.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotADocument {
    #[error("{0}")]
    Utf8(#[from] std::str::Utf8Error),
    #[error("{0}")]
    Fields(#[from] FieldError),
}

pub(super) fn document_from(payload: Option<&[u8]>) -> Result<Document, NotADocument> {
    let text = std::str::from_utf8(payload.unwrap_or_default())?;
    Ok(Document::from_json_str(text)?)
}

pub(super) fn millis_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(super) fn dead_letter_headers(
    failure: &Failure,
    source: Option<(&str, i32, i64)>,
    run_id: Option<&str>,
) -> OwnedHeaders {
    let attempts = failure.attempts.to_string();
    let time = millis_now().to_string();
    // Bounded, as event reasons are: a dead letter always fits its headroom.
    let error =
        Event::new(&Document::new(""), EventKind::Fail).with_message(failure.message.as_str());
    let mut headers = OwnedHeaders::new()
        .insert(Header {
            key: "weir.error",
            value: error.message.as_deref().map(str::as_bytes),
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
    // The run it failed in: a fleet run's control plane keeps its own.
    if let Some(run_id) = run_id {
        headers = headers.insert(Header {
            key: RUN_ID,
            value: Some(run_id.as_bytes()),
        });
    }
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
/// message (a JSON array), instead of one message per document; as many
/// messages as the message limit needs, in order.
#[derive(Debug, Default)]
pub(super) struct EventBuffer(BTreeMap<String, Vec<Event>>);

impl EventBuffer {
    /// Keep `event` for the topic it goes to, if it goes anywhere.
    pub(super) fn push(&mut self, topics: &KafkaTopics, event: Event) {
        if let Some(topic) = topics.events(event.run_id.as_deref()) {
            self.0.entry(topic).or_default().push(event);
        }
    }

    /// Produce each topic's events as JSON arrays that fit the message
    /// limit, accounted against `tag`.
    pub(super) fn send(
        &mut self,
        topics: &KafkaTopics,
        producer: &ThreadedProducer<Deliveries>,
        tag: Tag,
    ) -> Result<(), MessengerError> {
        for (topic, events) in std::mem::take(&mut self.0) {
            let mut chunk = Chunk::default();
            for event in &events {
                let json = serde_json::to_vec(event).map_err(transport)?;
                if !chunk.is_empty() && !topics.fits(chunk.len() + json.len() + 2) {
                    chunk.send(producer, &topic, tag)?;
                }
                chunk.add(&event.document_id, &json);
            }
            if !chunk.is_empty() {
                chunk.send(producer, &topic, tag)?;
            }
        }
        Ok(())
    }
}

/// One event message being built: a JSON array, keyed by its first event's id.
#[derive(Default)]
struct Chunk {
    key: String,
    payload: Vec<u8>,
}

impl Chunk {
    fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    fn len(&self) -> usize {
        self.payload.len()
    }

    fn add(&mut self, id: &str, json: &[u8]) {
        if self.payload.is_empty() {
            self.key = id.to_owned();
            self.payload.push(b'[');
        } else {
            self.payload.push(b',');
        }
        self.payload.extend_from_slice(json);
    }

    fn send(
        &mut self,
        producer: &ThreadedProducer<Deliveries>,
        topic: &str,
        tag: Tag,
    ) -> Result<(), MessengerError> {
        self.payload.push(b']');
        let result = produce_events(producer, topic, &self.key, &self.payload, tag);
        self.payload.clear();
        result
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
