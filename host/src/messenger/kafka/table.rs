//! A compacted one-partition topic read as a table of keys to values: what
//! `weir serve`'s fleet keeps in Kafka (the runs a standby takes over, the
//! pipelines fleet workers serve), and the group whose one member is the
//! active control plane.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client::Quiet;
use super::topics::TopicSpec;
use super::{KafkaTopics, transport};
use crate::config::KafkaConfig;
use crate::messenger::MessengerError;

/// The largest value a table holds: a run's record with its config (at most 1 MiB).
const MAX_VALUE_BYTES: usize = 4 << 20;

/// A compacted topic as a table.
pub struct Table {
    topics: KafkaTopics,
    topic: String,
    producer: ThreadedProducer<DefaultProducerContext>,
}

/// One change read from a table: a value, or its key removed (`None`).
pub type Change = (String, Option<Vec<u8>>);

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// The table on `topic` of the cluster in `kafka`, created (compacted,
    /// one partition) unless it exists.
    pub fn open(kafka: &KafkaConfig, topic: &str) -> Result<Self, MessengerError> {
        let topics = KafkaTopics::new(kafka.clone(), topic);
        let mut spec = TopicSpec::new(topic, 1);
        spec.config
            .insert("cleanup.policy".into(), "compact".into());
        spec.config
            .insert("max.message.bytes".into(), MAX_VALUE_BYTES.to_string());
        topics.create_topics(&[spec])?;
        let producer = topics
            .client(&kafka.producer)
            .set("enable.idempotence", "true")
            .set("message.max.bytes", MAX_VALUE_BYTES.to_string())
            .set("linger.ms", "0")
            .create()
            .map_err(transport)?;
        Ok(Self {
            topics,
            topic: topic.to_owned(),
            producer,
        })
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Set `key` to `value` (`None`: remove it), and wait until the
    /// cluster has it.
    pub fn put(&self, key: &str, value: Option<&[u8]>) -> Result<(), MessengerError> {
        let mut record = BaseRecord::<str, [u8]>::to(&self.topic).key(key);
        if let Some(value) = value {
            record = record.payload(value);
        }
        self.producer
            .send(record)
            .map_err(|(e, _)| transport(format!("cannot write to {}: {e}", self.topic)))?;
        self.producer
            .flush(Duration::from_secs(30))
            .map_err(|e| transport(format!("cannot write to {}: {e}", self.topic)))
    }

    /// A reader of the table from its start.
    pub fn reader(&self) -> Result<Reader, MessengerError> {
        let consumer: BaseConsumer<Quiet> = self
            .topics
            .consumer_config(&format!("weir-table-{}", std::process::id()))
            .set("fetch.message.max.bytes", MAX_VALUE_BYTES.to_string())
            .create_with_context(Quiet)
            .map_err(transport)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, Offset::Beginning)
            .map_err(transport)?;
        consumer.assign(&tpl).map_err(transport)?;
        Ok(Reader {
            consumer,
            topic: self.topic.clone(),
        })
    }

    /// Every key's value now.
    pub fn read_all(&self) -> Result<BTreeMap<String, Vec<u8>>, MessengerError> {
        let mut reader = self.reader()?;
        let mut table = BTreeMap::new();
        for (key, value) in reader.to_end()? {
            match value {
                Some(value) => table.insert(key, value),
                None => table.remove(&key),
            };
        }
        Ok(table)
    }
}

/// Reads a table's changes in order.
#[allow(missing_debug_implementations)]
pub struct Reader {
    consumer: BaseConsumer<Quiet>,
    topic: String,
}

impl Reader {
    /// The next change, waiting up to `timeout`.
    pub fn next(&mut self, timeout: Duration) -> Option<Change> {
        match self.consumer.poll(timeout)? {
            Ok(message) => {
                let key = String::from_utf8_lossy(message.key()?).into_owned();
                Some((key, message.payload().map(<[u8]>::to_vec)))
            }
            Err(e) => {
                tracing::debug!(topic = %self.topic, error = %e, "reading a table");
                None
            }
        }
    }

    /// Every change from here to the table's end as it is now.
    pub fn to_end(&mut self) -> Result<Vec<Change>, MessengerError> {
        let (_, end) = self
            .consumer
            .fetch_watermarks(&self.topic, 0, Duration::from_secs(30))
            .map_err(transport)?;
        let mut changes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let position = self
                .consumer
                .position()
                .map_err(transport)?
                .find_partition(&self.topic, 0)
                .and_then(|p| p.offset().to_raw());
            if position.is_some_and(|p| p >= end) || end == 0 {
                return Ok(changes);
            }
            if Instant::now() > deadline {
                return Err(transport(format!("cannot read {} to its end", self.topic)));
            }
            if let Some(change) = self.next(Duration::from_millis(200)) {
                changes.push(change);
            }
        }
    }
}

/// Whether this process leads: the one member of a consumer group on a
/// one-partition topic that owns the partition. Kafka's group protocol
/// makes one member at a time the owner, and gives the partition to another
/// member when the owner leaves or dies (after its session timeout).
#[allow(missing_debug_implementations)]
pub struct Leadership {
    consumer: BaseConsumer<Leading>,
    resigned: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Rebalance callbacks: ownership won and lost.
struct Leading {
    leads: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Leaving on purpose: losing the partition then is no reason to exit.
    resigned: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

super::client::quiet_client_context!(Leading);

impl ConsumerContext for Leading {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        use std::sync::atomic::Ordering;
        match rebalance {
            Rebalance::Assign(tpl) if tpl.count() > 0 => self.leads.store(true, Ordering::SeqCst),
            Rebalance::Assign(_) => {}
            Rebalance::Revoke(tpl) if tpl.count() == 0 => {}
            Rebalance::Revoke(_) | Rebalance::Error(_) => {
                if self.leads.swap(false, Ordering::SeqCst) && !self.resigned.load(Ordering::SeqCst)
                {
                    // Another process may lead now: acting on as leader
                    // would make two. Stop at once; a supervisor starts
                    // this one again, as a standby.
                    tracing::error!("this process no longer leads: stopping");
                    std::process::exit(3);
                }
            }
        }
    }
}

impl Leadership {
    /// Join the group `group` on `topic` (made with one partition), with a
    /// session of `session`: a dead leader is replaced after about that.
    pub fn join(
        kafka: &KafkaConfig,
        topic: &str,
        group: &str,
        session: Duration,
    ) -> Result<(Self, std::sync::Arc<std::sync::atomic::AtomicBool>), MessengerError> {
        let topics = KafkaTopics::new(kafka.clone(), topic);
        topics.create_topics(&[TopicSpec::new(topic, 1)])?;
        let leads = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let resigned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let consumer: BaseConsumer<Leading> = topics
            .consumer_config(group)
            .set("session.timeout.ms", session.as_millis().to_string())
            // A member joining (a standby) moves nothing from the leader:
            // with the eager protocol every rebalance would revoke it.
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set(
                "heartbeat.interval.ms",
                (session.as_millis() / 4).max(100).to_string(),
            )
            .create_with_context(Leading {
                leads: std::sync::Arc::clone(&leads),
                resigned: std::sync::Arc::clone(&resigned),
            })
            .map_err(transport)?;
        consumer.subscribe(&[topic]).map_err(transport)?;
        Ok((Self { consumer, resigned }, leads))
    }

    /// Leave the group on purpose (a standby stopped): a partition given
    /// and taken back as it leaves does not end the process.
    pub fn resign(self) {
        self.resigned
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // The consumer leaves the group as it is dropped, here.
    }

    /// Keep the membership alive: poll, for `timeout`.
    pub fn poll(&self, timeout: Duration) {
        if let Some(Err(e)) = self.consumer.poll(timeout) {
            tracing::debug!(error = %e, "leadership poll");
        }
    }
}
