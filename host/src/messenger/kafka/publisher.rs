//! The runner's side in Kafka mode: publishes to the source topic and reads
//! the run's event topic.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::delivery::{Deliveries, Shared, Tag, produce, shared_producer};
use super::wire::{events_from, poll_error};
use super::{KafkaTopics, transport};
use crate::document::Document;
use crate::event::Event;
use crate::messenger::{MessengerError, Polled, PublisherMessenger};

/// The runner's messenger in Kafka mode: produces to the source topic and
/// reads the run's event topic.
pub struct KafkaPublisherMessenger {
    source: String,
    producer: ThreadedProducer<Deliveries>,
    shared: Arc<Shared>,
    events: BaseConsumer,
    /// Events read but not yet handed out (a message carries many).
    received: Mutex<std::collections::VecDeque<Event>>,
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
    /// topics where missing, and reads the event topic from the start.
    pub fn new(topics: &KafkaTopics, run_id: &str) -> Result<Self, MessengerError> {
        let event_topic = topics
            .events(Some(run_id))
            .ok_or_else(|| transport("a run needs events: set kafka.events = true"))?;
        let mut wanted = topics.pipeline_topics()?;
        wanted.push((event_topic.clone(), 1));
        topics.create_topics(&wanted)?;
        let shared = Arc::new(Shared::default());
        let producer = shared_producer(topics, &shared)?;
        let mut config = topics.consumer_config(&format!("weir-runner-{run_id}"));
        config.set("enable.auto.commit", "true");
        let events: BaseConsumer = config.create().map_err(transport)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&event_topic, 0, Offset::Beginning)
            .map_err(transport)?;
        events.assign(&tpl).map_err(transport)?;
        Ok(Self {
            source: topics.source(),
            producer,
            shared,
            events,
            received: Mutex::default(),
        })
    }
}

impl PublisherMessenger for KafkaPublisherMessenger {
    fn send_for_processing(
        &self,
        doc: Document,
        _timeout: Duration,
    ) -> Result<Option<Document>, MessengerError> {
        produce(
            &self.producer,
            &self.source,
            doc.id(),
            doc.to_json_string().as_bytes(),
            None,
            Tag::Untracked,
        )?;
        Ok(None)
    }

    fn poll_event(&self, timeout: Duration) -> Result<Polled<Event>, MessengerError> {
        if let Some(failure) = &self.shared.lock().failure {
            return Err(transport(failure));
        }
        let mut received = self.received.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(event) = received.pop_front() {
            return Ok(Polled::Item(event));
        }
        match self.events.poll(timeout) {
            None => Ok(Polled::Idle),
            Some(Err(e)) => poll_error(e).map(|()| Polled::Idle),
            Some(Ok(message)) => {
                let events = events_from(message.payload().unwrap_or_default())
                    .map_err(|e| transport(format!("bad event on {}: {e}", message.topic())))?;
                received.extend(events);
                Ok(received.pop_front().map_or(Polled::Idle, Polled::Item))
            }
        }
    }
}

impl Drop for KafkaPublisherMessenger {
    fn drop(&mut self) {
        let _ = self.producer.flush(Duration::from_secs(30));
    }
}
