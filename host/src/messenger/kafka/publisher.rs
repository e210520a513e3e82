//! The runner's side in Kafka mode: publishes to the source topic, reads
//! the run's event topic, and reads who serves the pipeline.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client::{Quiet, poll_error};
use super::delivery::{Deliveries, Shared, Tag, produce, shared_producer};
use super::journal::{self, Entry};
use super::liveness::HeartbeatReader;
use super::topics::TopicSpec;
use super::wire::{dead_letter, document_headers, events_from, too_large};
use super::{KafkaTopics, settled, transport};
use crate::core::document::Document;
use crate::core::event::Event;
use crate::messenger::{MessengerError, Polled, PublisherMessenger, Resumed, Servers};

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
    /// Names this runner's journal entries: `<pid>:<ms>:<random>`.
    writer: String,
    /// The next journal entry's number. Held while entries are produced,
    /// so that they reach the topic in the order they were made.
    journal_numbers: Mutex<u64>,
}

/// How long the journal may take to be acknowledged (its `start`, or
/// everything before `done` and `done` itself), entries refused meanwhile
/// sent again.
const JOURNAL_WITHIN: Duration = Duration::from_secs(60);

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
        let start = resumed.is_none();
        let messenger = Self {
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
            writer: format!(
                "{}:{}:{:08x}",
                std::process::id(),
                super::wire::millis_now(),
                fastrand::u32(..)
            ),
            journal_numbers: Mutex::new(0),
        };
        if start {
            // Before any of its documents, so every event about them is
            // after it; waited for, so a runner that dies now leaves no
            // event before it.
            messenger.write(Entry::Start { connector });
            messenger.settle_journal(std::time::Instant::now() + JOURNAL_WITHIN)?;
        }
        Ok(messenger)
    }

    /// Journal the ids the source topic has acknowledged since last time,
    /// after the entries the broker refused (sent again as they were).
    fn journal_published(&self) {
        let mut numbers = self
            .journal_numbers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let again = std::mem::take(&mut self.shared.lock().journal_again);
        for (number, payload) in again {
            self.send_journal(number, payload);
        }
        let ids = std::mem::take(
            &mut *self
                .shared
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for mut entry in
            journal::published_entries(self.connector, ids, self.topics.message_limit() / 2)
        {
            let number = *numbers;
            *numbers += 1;
            if let Entry::Published { batch, .. } = &mut entry {
                *batch = Some(format!("{}:{number}", self.writer));
            }
            self.send_journal(number, entry.payload());
        }
    }

    /// Put `entry` in the run's journal, after what is there so far.
    fn write(&self, entry: Entry) {
        let mut numbers = self
            .journal_numbers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let number = *numbers;
        *numbers += 1;
        self.send_journal(number, entry.payload());
    }

    /// Produce journal entry `number`, kept until acknowledged: refused
    /// (now or by the broker later), it waits to be sent again.
    fn send_journal(&self, number: u64, payload: Vec<u8>) {
        self.shared.lock().journal.insert(number, payload.clone());
        let sent = produce(
            &self.producer,
            &self.event_topic,
            "",
            &payload,
            Some(Entry::headers()),
            Tag::Journal(number),
        );
        if let Err(e) = sent {
            tracing::warn!(error = %e, "a journal entry could not be sent yet; it is sent again");
            self.shared.lock().journal_refused(number);
        }
    }

    /// Wait until every journal entry made so far is acknowledged, sending
    /// refused ones again, until `deadline`.
    fn settle_journal(&self, deadline: std::time::Instant) -> Result<(), MessengerError> {
        loop {
            self.journal_published();
            if self.shared.wait_journal_settled(Duration::from_millis(500)) {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(transport(format!(
                    "the run's journal on {} was not acknowledged within {JOURNAL_WITHIN:?}",
                    self.event_topic
                )));
            }
        }
    }

    /// [`journal_published`](Self::journal_published), every [`journal::EVERY`].
    fn journal_if_due(&self) {
        let mut last = self
            .journaled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.elapsed() < journal::EVERY {
            return;
        }
        *last = std::time::Instant::now();
        drop(last);
        self.journal_published();
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
        self.journal_if_due();
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

    fn servers(&self) -> Servers {
        self.heartbeats.servers()
    }

    fn resumed(&self) -> Option<Resumed> {
        self.resumed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn publishing_done(&self) -> Result<(), MessengerError> {
        // Every document acknowledged, and its journal entry too, before
        // `done`: a resumed run that reads `done` runs the connector no
        // more, so an id missing from the journal would be miscounted.
        self.producer
            .flush(Duration::from_secs(60))
            .map_err(transport)?;
        let deadline = std::time::Instant::now() + JOURNAL_WITHIN;
        self.settle_journal(deadline)?;
        self.write(Entry::Done {
            connector: self.connector,
        });
        self.settle_journal(deadline)
    }
}

impl Drop for KafkaPublisherMessenger {
    fn drop(&mut self) {
        let _ = self.producer.flush(Duration::from_secs(30));
        self.journal_published();
        let _ = self.producer.flush(Duration::from_secs(30));
    }
}
