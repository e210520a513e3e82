//! Kafka and Hybrid modes' state store: a compacted topic per pipeline,
//! `<pipeline>_state`, one partition, keyed by connector and key (a removed
//! key is a tombstone), so that any runner of the pipeline can resume.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::KafkaTopics;
use super::client::quiet_client_context;
use super::topics::TopicSpec;
use crate::config::KafkaConfig;
use crate::core::state::{StateChange, StateError, StateStore, StateStores};

/// How long a load or a commit may wait for the cluster.
const WAIT: Duration = Duration::from_secs(30);

/// Between a connector's name and a key, in a message key.
const SEPARATOR: char = '\u{0}';

/// The state topics of a cluster.
#[derive(Debug, Clone)]
pub struct KafkaStates {
    config: KafkaConfig,
}

impl KafkaStates {
    pub fn new(config: KafkaConfig) -> Self {
        Self { config }
    }
}

/// Counts deliveries that failed.
#[derive(Default)]
struct Failures(Arc<AtomicU64>);

quiet_client_context!(Failures);

impl ProducerContext for Failures {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, (): ()) {
        if let Err((e, _)) = result {
            tracing::warn!(error = %e, "a state change was not delivered");
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct KafkaStore {
    topic: String,
    prefix: String,
    topics: KafkaTopics,
    producer: BaseProducer<Failures>,
    failures: Arc<AtomicU64>,
}

fn failed(topic: &str, e: impl std::fmt::Display) -> StateError {
    StateError::new(format!("connector state on topic {topic}: {e}"))
}

/// `<prefix><pipeline>_state`: `kafka.state_prefix`, else `topic_prefix`.
fn state_topic(config: &KafkaConfig, pipeline: &str) -> String {
    let prefix = config
        .state_prefix
        .as_deref()
        .or(config.topic_prefix.as_deref())
        .unwrap_or_default();
    format!("{prefix}{pipeline}_state")
}

impl StateStores for KafkaStates {
    fn open(&self, pipeline: &str, connector: &str) -> Result<Box<dyn StateStore>, StateError> {
        let topics = KafkaTopics::new(self.config.clone(), pipeline);
        let topic = state_topic(&self.config, pipeline);
        let mut spec = TopicSpec::new(&topic, 1);
        spec.config
            .insert("cleanup.policy".into(), "compact".into());
        topics
            .create_topics(&[spec])
            .map_err(|e| failed(&topic, e))?;
        let failures = Failures::default();
        let counter = Arc::clone(&failures.0);
        let producer: BaseProducer<Failures> = topics
            .producer_config()
            .create_with_context(failures)
            .map_err(|e| failed(&topic, e))?;
        Ok(Box::new(KafkaStore {
            prefix: format!("{connector}{SEPARATOR}"),
            topic,
            topics,
            producer,
            failures: counter,
        }))
    }

    fn describe(&self, pipeline: &str) -> String {
        format!("Kafka topic {}", state_topic(&self.config, pipeline))
    }
}

impl KafkaStore {
    /// Send `records` (key, value or a tombstone) and wait until each is
    /// acknowledged.
    fn send(&mut self, records: &[(String, Option<&str>)]) -> Result<(), StateError> {
        let before = self.failures.load(Ordering::Relaxed);
        for (key, value) in records {
            let mut record = BaseRecord::<str, str>::to(&self.topic).key(key.as_str());
            if let Some(value) = value {
                record = record.payload(value);
            }
            let mut record = record;
            loop {
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        record = back;
                        self.producer.poll(Duration::from_millis(100));
                    }
                    Err((e, _)) => return Err(failed(&self.topic, e)),
                }
            }
        }
        self.producer
            .flush(WAIT)
            .map_err(|e| failed(&self.topic, e))?;
        if self.failures.load(Ordering::Relaxed) > before {
            return Err(failed(&self.topic, "a change was not delivered"));
        }
        Ok(())
    }
}

impl StateStore for KafkaStore {
    fn load(&mut self) -> Result<Vec<(String, String)>, StateError> {
        let topic = &self.topic;
        let mut config = self
            .topics
            .consumer_config(&format!("weir-state-{}", std::process::id()));
        config.set("enable.partition.eof", "true");
        let consumer: BaseConsumer = config.create().map_err(|e| failed(topic, e))?;
        // A topic made a moment ago may not be in every broker's metadata yet.
        let (low, high) = super::settled(|| consumer.fetch_watermarks(topic, 0, WAIT))
            .map_err(|e| failed(topic, e))?;
        let mut state = std::collections::HashMap::new();
        if high <= low {
            return Ok(Vec::new());
        }
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 0, Offset::Beginning)
            .map_err(|e| failed(topic, e))?;
        consumer.assign(&assignment).map_err(|e| failed(topic, e))?;
        let mut last_progress = Instant::now();
        loop {
            let Some(message) = consumer.poll(Duration::from_millis(200)) else {
                if last_progress.elapsed() > WAIT {
                    return Err(failed(topic, "reading it stalled before its end"));
                }
                continue;
            };
            let message = match message {
                Ok(message) => message,
                Err(KafkaError::PartitionEOF(_)) => break,
                // An outage is waited out, as long as a read may stall.
                Err(KafkaError::MessageConsumption(code)) if super::client::is_outage(code) => {
                    if last_progress.elapsed() > WAIT {
                        return Err(failed(topic, code));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                Err(e) => return Err(failed(topic, e)),
            };
            last_progress = Instant::now();
            let key = message
                .key()
                .and_then(|k| std::str::from_utf8(k).ok())
                .and_then(|k| k.strip_prefix(&self.prefix));
            if let Some(key) = key {
                match message.payload() {
                    Some(value) => {
                        let value = String::from_utf8_lossy(value).into_owned();
                        state.insert(key.to_owned(), value);
                    }
                    None => {
                        state.remove(key);
                    }
                }
            }
            if message.offset() + 1 >= high {
                break;
            }
        }
        Ok(state.into_iter().collect())
    }

    fn commit(&mut self, changes: &[StateChange]) -> Result<(), StateError> {
        let records: Vec<(String, Option<&str>)> = changes
            .iter()
            .map(|(key, value)| (format!("{}{key}", self.prefix), value.as_deref()))
            .collect();
        self.send(&records)
    }

    fn clear(&mut self) -> Result<(), StateError> {
        let keys: Vec<(String, Option<&str>)> = self
            .load()?
            .into_iter()
            .map(|(key, _)| (format!("{}{key}", self.prefix), None))
            .collect();
        self.send(&keys)
    }
}
