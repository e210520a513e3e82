//! Kafka and Hybrid modes' state store: a compacted topic per pipeline,
//! `<pipeline>_state`, one partition, keyed by connector and key (a removed
//! key is a tombstone), so that any runner of the pipeline can resume.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
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

    /// Whether the cluster has the pipeline's state topic (asked without
    /// making it).
    fn exists(&self, pipeline: &str) -> Result<bool, StateError> {
        let topic = state_topic(&self.config, pipeline);
        KafkaTopics::new(self.config.clone(), pipeline)
            .partitions(&topic)
            .map(|partitions| partitions.is_some())
            .map_err(|e| failed(&topic, e))
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
        let mut state = HashMap::new();
        self.load_each(&mut |(key, value)| {
            match value {
                Some(value) => state.insert(key, value),
                None => state.remove(&key),
            };
            Ok(())
        })?;
        Ok(state.into_iter().collect())
    }

    /// The topic's messages of this connector in log order, each handed
    /// over as it is read (a tombstone as a removal): the loader bounds
    /// what it holds as it goes, and nothing here holds more than one
    /// message. Every partition is read to where it ended when the read
    /// began.
    fn load_each(
        &mut self,
        each: &mut dyn FnMut(StateChange) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let topic = &self.topic;
        let mut config = self
            .topics
            .consumer_config(&format!("weir-state-{}", std::process::id()));
        config.set("enable.partition.eof", "true");
        let consumer: BaseConsumer = config.create().map_err(|e| failed(topic, e))?;
        // A topic made a moment ago may not be in every broker's metadata yet.
        let partitions =
            super::settled(|| partitions(&consumer, topic)).map_err(|e| failed(topic, e))?;
        let mut watermarks = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let marks = super::settled(|| consumer.fetch_watermarks(topic, partition, WAIT))
                .map_err(|e| failed(topic, e))?;
            watermarks.push((partition, marks));
        }
        let mut ends = Ends::new(watermarks);
        if ends.done() {
            return Ok(());
        }
        let mut assignment = TopicPartitionList::new();
        for &partition in ends.left.keys() {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .map_err(|e| failed(topic, e))?;
        }
        consumer.assign(&assignment).map_err(|e| failed(topic, e))?;
        let mut last_progress = Instant::now();
        while !ends.done() {
            let Some(message) = consumer.poll(Duration::from_millis(200)) else {
                if last_progress.elapsed() > WAIT {
                    return Err(failed(topic, "reading it stalled before its end"));
                }
                continue;
            };
            let message = match message {
                Ok(message) => message,
                Err(KafkaError::PartitionEOF(partition)) => {
                    ends.reached(partition);
                    continue;
                }
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
            if let Some(change) = change(&self.prefix, message.key(), message.payload()) {
                each(change)?;
            }
            ends.read(message.partition(), message.offset());
        }
        Ok(())
    }

    fn commit(&mut self, changes: &[StateChange]) -> Result<(), StateError> {
        let records: Vec<(String, Option<&str>)> = changes
            .iter()
            .map(|(key, value)| (format!("{}{key}", self.prefix), value.as_deref()))
            .collect();
        self.send(&records)
    }

    fn clear(&mut self) -> Result<(), StateError> {
        // The keys alone, not their values: each gets a tombstone.
        let mut keys = HashSet::new();
        self.load_each(&mut |(key, value)| {
            if value.is_some() {
                keys.insert(key);
            } else {
                keys.remove(&key);
            }
            Ok(())
        })?;
        let keys: Vec<(String, Option<&str>)> = keys
            .into_iter()
            .map(|key| (format!("{}{key}", self.prefix), None))
            .collect();
        self.send(&keys)
    }
}

/// The partitions of `topic`, an error while the cluster does not know it.
fn partitions(consumer: &BaseConsumer, topic: &str) -> KafkaResult<Vec<i32>> {
    let metadata = consumer.fetch_metadata(Some(topic), WAIT)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(KafkaError::MetadataFetch(
            RDKafkaErrorCode::UnknownTopicOrPartition,
        ));
    }
    Ok(partitions)
}

/// The change a message of the state topic makes to the state of the
/// connector whose keys start with `prefix`: none for another connector's
/// key (or a key that is not text), a removal for a tombstone.
fn change(prefix: &str, key: Option<&[u8]>, payload: Option<&[u8]>) -> Option<StateChange> {
    let key = std::str::from_utf8(key?).ok()?.strip_prefix(prefix)?;
    let value = payload.map(|v| String::from_utf8_lossy(v).into_owned());
    Some((key.to_owned(), value))
}

/// Where a read of the state topic stands: the partitions not yet read to
/// the end they had when it began.
#[derive(Debug)]
struct Ends {
    /// Each partition left, with its high watermark.
    left: BTreeMap<i32, i64>,
}

impl Ends {
    /// The partitions with messages, from their `(low, high)` watermarks.
    fn new(watermarks: impl IntoIterator<Item = (i32, (i64, i64))>) -> Self {
        let left = watermarks
            .into_iter()
            .filter(|(_, (low, high))| high > low)
            .map(|(partition, (_, high))| (partition, high))
            .collect();
        Self { left }
    }

    /// The message at `offset` of `partition` was read.
    fn read(&mut self, partition: i32, offset: i64) {
        if self
            .left
            .get(&partition)
            .is_some_and(|&high| offset + 1 >= high)
        {
            self.left.remove(&partition);
        }
    }

    /// `partition` has no more messages now (its last ones may have been
    /// compacted away).
    fn reached(&mut self, partition: i32) {
        self.left.remove(&partition);
    }

    fn done(&self) -> bool {
        self.left.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_changes_only_its_connectors_state() {
        let prefix = format!("c{SEPARATOR}");
        let key = |k: &'static str| k.as_bytes();
        let set = change(&prefix, Some(key("c\0k1")), Some(b"v"));
        assert_eq!(set, Some(("k1".into(), Some("v".into()))));
        let removed = change(&prefix, Some(key("c\0k1")), None);
        assert_eq!(removed, Some(("k1".into(), None)));
        // Another connector's keys, one whose name starts the same, keys
        // with no connector, no key at all, a key that is not text.
        assert_eq!(change(&prefix, Some(key("d\0k1")), Some(b"v")), None);
        assert_eq!(change(&prefix, Some(key("cc\0k1")), Some(b"v")), None);
        assert_eq!(change(&prefix, Some(key("k1")), Some(b"v")), None);
        assert_eq!(change(&prefix, None, Some(b"v")), None);
        assert_eq!(change(&prefix, Some(b"c\0\xff"), Some(b"v")), None);
        // An empty key and value are a key and a value; a value that is
        // not text is kept as text.
        assert_eq!(
            change(&prefix, Some(key("c\0")), Some(b"")),
            Some((String::new(), Some(String::new())))
        );
        assert_eq!(
            change(&prefix, Some(key("c\0k")), Some(b"a\xffb")),
            Some(("k".into(), Some("a\u{fffd}b".into())))
        );
    }

    #[test]
    fn a_read_ends_when_every_partition_reached_its_end() {
        // Partition 1 is empty, 2 holds offsets 3..5 (the rest compacted).
        let mut ends = Ends::new([(0, (0, 2)), (1, (4, 4)), (2, (3, 6))]);
        assert!(!ends.done());
        ends.read(0, 0);
        ends.read(2, 4);
        ends.read(0, 1);
        assert!(!ends.done(), "{ends:?}");
        // A partition not being read, or read past its end, changes nothing else.
        ends.read(7, 100);
        assert!(!ends.done(), "{ends:?}");
        ends.read(2, 5);
        assert!(ends.done(), "{ends:?}");
        // Its last messages compacted away: the end is known by the reader.
        let mut ends = Ends::new([(0, (0, 10))]);
        ends.read(0, 3);
        ends.reached(0);
        assert!(ends.done());
        assert!(Ends::new([(0, (5, 5))]).done());
        assert!(Ends::new([]).done());
    }
}
