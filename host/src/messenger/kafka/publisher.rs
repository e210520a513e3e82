//! The runner's side in Kafka mode: publishes to the source topic, reads
//! the run's event topic, and reads who serves the pipeline.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client::{Quiet, cluster_is_down, cluster_up, poll_error};
use super::delivery::{Deliveries, Shared, Tag, produce, shared_producer};
use super::journal::{self, Entry};
use super::liveness::HeartbeatReader;
use super::topics::TopicSpec;
use super::wire::{dead_letter, document_headers, events_from, too_large};
use super::{KafkaTopics, settled, transport};
use crate::core::document::Document;
use crate::core::event::Event;
use crate::messenger::{MessengerError, Polled, PublisherMessenger, Resumed, Seen};

/// The runner's messenger in Kafka mode: produces to the source topic and
/// reads the run's event topic.
pub struct KafkaPublisherMessenger {
    topics: KafkaTopics,
    source: String,
    producer: ThreadedProducer<Deliveries>,
    shared: Arc<Shared>,
    events: BaseConsumer<Quiet>,
    event_topic: String,
    heartbeats: HeartbeatReader,
    /// Events read but not yet handed out (a message carries many).
    received: Mutex<VecDeque<Event>>,
    /// Which of the run's connectors this is, in the run's journal.
    connector: usize,
    /// What an earlier runner left of this connector, until taken.
    resumed: Mutex<Option<Resumed>>,
    /// When acknowledged ids were last journaled.
    journaled: Mutex<std::time::Instant>,
}

impl std::fmt::Debug for KafkaPublisherMessenger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaPublisherMessenger")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl KafkaPublisherMessenger {
    /// Creates the run's event topic (one partition) and the pipeline's
    /// topics where missing, and reads the event topic from its current
    /// end: events of this connector's documents, never an earlier one's.
    ///
    /// It is the run's `connector`th connector (from 0, in the order the
    /// run starts them). With `resume`, an earlier runner of the run may
    /// have started it: what the run's journal says of it is read first.
    pub fn new(
        topics: &KafkaTopics,
        run_id: &str,
        connector: usize,
        resume: bool,
    ) -> Result<Self, MessengerError> {
        let event_topic = topics
            .events(Some(run_id))
            .ok_or_else(|| transport("a run needs events: set kafka.events = true"))?;
        let mut wanted = topics.pipeline_topics()?;
        // With the pipeline topics' settings: events are split to their limit.
        wanted.push(TopicSpec {
            config: topics.config.topic_config.clone(),
            ..TopicSpec::new(&event_topic, 1)
        });
        wanted.push(topics.heartbeat_topic());
        topics.create_topics(&wanted)?;
        let shared = Arc::new(Shared::default());
        let producer = shared_producer(topics, &shared)?;
        // Partitions are assigned, never subscribed: the group commits nothing.
        let group = format!("weir-runner-{run_id}");
        let events: BaseConsumer<Quiet> = topics
            .consumer_config(&group)
            .create_with_context(Quiet)
            .map_err(transport)?;
        // A topic just created may take a moment to reach every broker's metadata.
        let (start, end) =
            settled(|| events.fetch_watermarks(&event_topic, 0, Duration::from_secs(10)))?;
        let mut tpl = TopicPartitionList::new();
        let from = if resume { start } else { end };
        tpl.add_partition_offset(&event_topic, 0, Offset::Offset(from))
            .map_err(transport)?;
        events.assign(&tpl).map_err(transport)?;
        let resumed = if resume {
            journal::replay(&events, &event_topic, end, connector)?
        } else {
            None
        };
        if resumed.is_none() {
            // Before any of its documents, so every event about them is
            // after it; waited for, so a runner that dies now leaves no
            // event before it.
            let entry = Entry::Start { connector };
            produce(
                &producer,
                &event_topic,
                run_id,
                &entry.payload(),
                Some(Entry::headers()),
                Tag::Untracked,
            )?;
            producer.flush(Duration::from_secs(30)).map_err(transport)?;
        }
        Ok(Self {
            topics: topics.clone(),
            source: topics.source(),
            producer,
            shared,
            events,
            event_topic,
            heartbeats: HeartbeatReader::new(topics, &group)?,
            received: Mutex::default(),
            connector,
            resumed: Mutex::new(resumed),
            journaled: Mutex::new(std::time::Instant::now()),
        })
    }

    /// Journal the ids the source topic has acknowledged since last time.
    fn journal_published(&self) -> Result<(), MessengerError> {
        let ids = std::mem::take(
            &mut *self
                .shared
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for entry in
            journal::published_entries(self.connector, ids, self.topics.message_limit() / 2)
        {
            self.write(&entry)?;
        }
        Ok(())
    }

    /// Put `entry` in the run's journal.
    fn write(&self, entry: &Entry) -> Result<(), MessengerError> {
        produce(
            &self.producer,
            &self.event_topic,
            "",
            &entry.payload(),
            Some(Entry::headers()),
            Tag::Untracked,
        )
    }

    /// [`journal_published`](Self::journal_published), every [`journal::EVERY`].
    fn journal_if_due(&self) -> Result<(), MessengerError> {
        let mut last = self
            .journaled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.elapsed() < journal::EVERY {
            return Ok(());
        }
        *last = std::time::Instant::now();
        drop(last);
        self.journal_published()
    }

    /// Fail a document too large for the source topic: dead-letter its id
    /// with the reason.
    fn refuse(&self, doc: &Document, json_bytes: usize) -> Result<MessengerError, MessengerError> {
        let failure = too_large(&self.topics, json_bytes);
        dead_letter(
            &self.producer,
            &self.topics,
            doc,
            &failure,
            None,
            Tag::Untracked,
        )?;
        Ok(MessengerError::Refused(failure.message))
    }
}

impl PublisherMessenger for KafkaPublisherMessenger {
    fn send_for_processing(
        &self,
        doc: Document,
        _timeout: Duration,
    ) -> Result<Option<Document>, MessengerError> {
        let json = doc.to_json_string();
        if !self.topics.fits(json.len()) {
            return Err(self.refuse(&doc, json.len())?);
        }
        let headers = document_headers(doc.run_id(), None);
        produce(
            &self.producer,
            &self.source,
            doc.id(),
            json.as_bytes(),
            Some(headers),
            Tag::Published,
        )?;
        Ok(None)
    }

    fn poll_event(&self, timeout: Duration) -> Result<Polled<Event>, MessengerError> {
        if let Some(failure) = &self.shared.lock().failure {
            return Err(transport(failure));
        }
        self.journal_if_due()?;
        let mut received = self.received.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(event) = received.pop_front() {
            return Ok(Polled::Item(event));
        }
        match self.events.poll(timeout) {
            None => Ok(Polled::Idle),
            Some(Err(e)) => poll_error(e).map(|()| Polled::Idle),
            Some(Ok(message)) if journal::is_journal(&message) => Ok(Polled::Idle),
            Some(Ok(message)) => {
                match events_from(message.payload().unwrap_or_default()) {
                    Ok(events) => received.extend(events),
                    Err(e) => tracing::warn!(
                        topic = message.topic(),
                        offset = message.offset(),
                        error = %e,
                        "a message on the event topic is not events; skipped"
                    ),
                }
                Ok(received.pop_front().map_or(Polled::Idle, Polled::Item))
            }
        }
    }

    fn servers(&self) -> Option<Vec<Seen>> {
        if cluster_is_down() {
            // The runner may produce nothing for a long while: ask the
            // cluster itself whether it is back.
            if self
                .events
                .fetch_metadata(Some(&self.event_topic), Duration::from_millis(500))
                .is_ok()
            {
                cluster_up();
            }
            return None;
        }
        Some(self.heartbeats.servers())
    }

    fn resumed(&self) -> Option<Resumed> {
        self.resumed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn publishing_done(&self) -> Result<(), MessengerError> {
        // Every document acknowledged, and journaled, before `done`.
        self.producer
            .flush(Duration::from_secs(60))
            .map_err(transport)?;
        self.journal_published()?;
        self.write(&Entry::Done {
            connector: self.connector,
        })?;
        self.producer
            .flush(Duration::from_secs(60))
            .map_err(transport)
    }
}

impl Drop for KafkaPublisherMessenger {
    fn drop(&mut self) {
        let _ = self.producer.flush(Duration::from_secs(30));
        let _ = self.journal_published();
        let _ = self.producer.flush(Duration::from_secs(30));
    }
}
