//! A Kafka topic source (`grants.kafka`): the host's rdkafka consumer, one
//! per granted source and run, in the grant's consumer group.
//!
//! - **Offsets follow documents**: a record is pending from its delivery
//!   until the run settles it (every document it made is done: indexed,
//!   dropped, or failed and dead-lettered; or the connector rejected it and
//!   the run dead-lettered it). A partition's offset is committed only up to
//!   its first record still pending (`offsets.rs`), every
//!   [`COMMIT_INTERVAL`] as the connector receives, and as the source closes.
//!   Auto-commit and the offset store are off.
//! - **Order**: records come in partition order; a record's key picks its
//!   partition, so the records of one key are delivered (and published) in
//!   order, and documents route to workers by id.
//! - **Rebalances** (cooperative-sticky): a partition revoked commits what is
//!   done and forgets the rest, which its new owner reads again (duplicates,
//!   never loss).
//! - **Reconnecting** is librdkafka's: while the cluster is away, `receive`
//!   answers no records.

mod offsets;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};

use super::Opening;
use crate::core::messages::{Delivery, ReceiveError, Settled, Source};
use crate::plugin::{KafkaGrant, KafkaStart};
use offsets::{Offsets, Partition};

/// How often the offsets done are committed while records flow.
pub(crate) const COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// Properties the host sets itself: a grant's `properties` cannot replace
/// them.
pub(crate) const HOST_PROPERTIES: [&str; 6] = [
    "bootstrap.servers",
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "partition.assignment.strategy",
];

/// The consumer's context: librdkafka's logs as tracing, and rebalances
/// that commit what is done of the partitions revoked.
struct Context {
    offsets: Arc<Mutex<Offsets>>,
    describe: String,
}

impl ClientContext for Context {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel as L;
        match level {
            L::Emerg | L::Alert | L::Critical | L::Error => {
                tracing::warn!(source = %self.describe, facility = fac, "librdkafka: {message}");
            }
            _ => tracing::debug!(source = %self.describe, facility = fac, "librdkafka: {message}"),
        }
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        tracing::warn!(source = %self.describe, %error, reason, "Kafka source client error");
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else {
            return;
        };
        let partitions: Vec<Partition> = revoked
            .elements()
            .iter()
            .map(|e| (e.topic().to_owned(), e.partition()))
            .collect();
        let due = self
            .offsets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .revoke(&partitions);
        tracing::info!(source = %self.describe, revoked = partitions.len(), "partitions revoked: what is done is committed");
        commit(consumer, &due, CommitMode::Sync, &self.describe);
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(assigned) = rebalance {
            tracing::info!(source = %self.describe, assigned = assigned.count(), "partitions assigned");
        }
    }
}

/// Commit `due` offsets; a failure is logged (the next commit covers it).
fn commit(
    consumer: &BaseConsumer<Context>,
    due: &[(Partition, i64)],
    mode: CommitMode,
    describe: &str,
) {
    if due.is_empty() {
        return;
    }
    let mut list = TopicPartitionList::with_capacity(due.len());
    for ((topic, partition), offset) in due {
        if let Err(e) = list.add_partition_offset(topic, *partition, Offset::Offset(*offset)) {
            tracing::warn!(source = %describe, error = %e, "an offset could not be listed for commit");
        }
    }
    if let Err(e) = consumer.commit(&list, mode) {
        tracing::warn!(source = %describe, error = %e, "offsets not committed now (the next commit covers them)");
    }
}

/// Topics of one grant, consumed as its consumer group.
pub(crate) struct KafkaSource {
    consumer: BaseConsumer<Context>,
    offsets: Arc<Mutex<Offsets>>,
    describe: String,
    last_commit: Mutex<Instant>,
    closed: AtomicBool,
    paused: AtomicBool,
}

impl KafkaSource {
    pub(crate) fn open(grant: &KafkaGrant, at: &Opening<'_>) -> Result<Self, String> {
        let describe = format!("kafka {} (group {})", grant.topics.join(","), grant.group);
        let mut config = ClientConfig::new();
        for (key, value) in &grant.properties {
            if HOST_PROPERTIES.contains(&key.as_str()) {
                return Err(format!(
                    "property `{key}` is the host's: set it in the grant's own keys, or not at all"
                ));
            }
            config.set(key, value);
        }
        config
            .set("bootstrap.servers", &grant.brokers)
            .set("group.id", &grant.group)
            .set("client.id", format!("weir-{}-{}", at.connector, at.name))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set(
                "auto.offset.reset",
                match grant.start {
                    KafkaStart::Earliest => "earliest",
                    KafkaStart::Latest => "latest",
                },
            )
            .set("partition.assignment.strategy", "cooperative-sticky");
        let offsets = Arc::new(Mutex::new(Offsets::default()));
        let context = Context {
            offsets: Arc::clone(&offsets),
            describe: describe.clone(),
        };
        let consumer: BaseConsumer<Context> = config
            .create_with_context(context)
            .map_err(|e| format!("the Kafka consumer cannot be made: {e}"))?;
        let topics: Vec<&str> = grant.topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .map_err(|e| format!("cannot subscribe to {}: {e}", topics.join(", ")))?;
        tracing::debug!(run_id = at.run_id, pipeline = at.pipeline, source = %describe, "Kafka source subscribed");
        Ok(Self {
            consumer,
            offsets,
            describe,
            last_commit: Mutex::new(Instant::now()),
            closed: AtomicBool::new(false),
            paused: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Offsets> {
        self.offsets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commit what is done, when [`COMMIT_INTERVAL`] has passed.
    fn commit_due(&self) {
        {
            let mut last = self
                .last_commit
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.elapsed() < COMMIT_INTERVAL {
                return;
            }
            *last = Instant::now();
        }
        let due = self.lock().due();
        commit(&self.consumer, &due, CommitMode::Async, &self.describe);
    }

    /// A polled record as a delivery, counted pending.
    fn delivery(&self, record: &rdkafka::message::BorrowedMessage<'_>) -> Delivery {
        let token = self
            .lock()
            .delivered(record.topic(), record.partition(), record.offset());
        let headers = record.headers().map_or_else(Vec::new, |headers| {
            headers
                .iter()
                .map(|h| {
                    (
                        h.key.to_owned(),
                        h.value.map(<[u8]>::to_vec).unwrap_or_default(),
                    )
                })
                .collect()
        });
        Delivery {
            token,
            origin: format!(
                "{}/{}/{}",
                record.topic(),
                record.partition(),
                record.offset()
            ),
            key: record.key().map(<[u8]>::to_vec),
            body: record.payload().map(<[u8]>::to_vec).unwrap_or_default(),
            headers,
            timestamp_ms: record.timestamp().to_millis(),
            attempt: 1,
        }
    }
}

impl Source for KafkaSource {
    fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, ReceiveError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ReceiveError::Stopping);
        }
        self.commit_due();
        if self.paused.load(Ordering::SeqCst) {
            // Polled still (no record comes: the assignment is paused), so
            // the group keeps this member.
            let _ = self.consumer.poll(wait);
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        let mut timeout = wait;
        while out.len() < max {
            match self.consumer.poll(timeout) {
                None => break,
                Some(Ok(record)) => out.push(self.delivery(&record)),
                Some(Err(e)) => {
                    // A broker away, a partition's end: librdkafka goes on.
                    tracing::debug!(source = %self.describe, error = %e, "Kafka source poll");
                    if out.is_empty() {
                        break;
                    }
                }
            }
            timeout = Duration::ZERO;
        }
        Ok(out)
    }

    fn settle(&self, token: u64, settled: Settled) {
        if settled == Settled::Abandoned {
            return;
        }
        // A topic moves on whatever became of the record: failed documents
        // and rejected records are dead-lettered by the run.
        self.lock().settled(token);
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let (due, abandoned) = {
            let offsets = self.lock();
            (offsets.all(), offsets.in_flight())
        };
        commit(&self.consumer, &due, CommitMode::Sync, &self.describe);
        self.consumer.unsubscribe();
        tracing::info!(source = %self.describe, partitions = due.len(), abandoned, "Kafka source closed: what is done is committed, the rest is read again by the next run");
    }

    fn pause(&self) {
        if let Ok(assignment) = self.consumer.assignment()
            && self.consumer.pause(&assignment).is_ok()
        {
            self.paused.store(true, Ordering::SeqCst);
        }
    }

    fn resume(&self) {
        if let Ok(assignment) = self.consumer.assignment() {
            let _ = self.consumer.resume(&assignment);
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}
