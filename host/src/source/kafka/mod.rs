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
//! - **Paused** (the run paused): the assignment is paused, partitions
//!   assigned meanwhile too, and a keeper thread polls while the connector
//!   does not, so the group keeps this member however long the pause
//!   (`max.poll.interval.ms`) and nothing is read again after it.

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
    /// The source is paused: partitions assigned are paused at once.
    paused: Arc<AtomicBool>,
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

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(assigned) = rebalance {
            tracing::info!(source = %self.describe, assigned = assigned.count(), "partitions assigned");
            if self.paused.load(Ordering::SeqCst)
                && let Err(e) = consumer.pause(assigned)
            {
                tracing::warn!(source = %self.describe, error = %e, "partitions assigned during a pause could not be paused");
            }
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

/// How long the keeper's one poll waits while the source is paused.
const KEEPER_POLL: Duration = Duration::from_millis(200);

/// Topics of one grant, consumed as its consumer group.
pub(crate) struct KafkaSource(Arc<Inner>);

struct Inner {
    consumer: BaseConsumer<Context>,
    offsets: Arc<Mutex<Offsets>>,
    describe: String,
    last_commit: Mutex<Instant>,
    closed: AtomicBool,
    paused: Arc<AtomicBool>,
    /// Held by whoever polls (the connector's `receive`, or the keeper).
    polling: Mutex<()>,
    /// Records the keeper's polls got before their partitions were paused:
    /// the next `receive`'s first.
    kept: Mutex<Vec<Delivery>>,
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
        let paused = Arc::new(AtomicBool::new(false));
        let context = Context {
            offsets: Arc::clone(&offsets),
            describe: describe.clone(),
            paused: Arc::clone(&paused),
        };
        let consumer: BaseConsumer<Context> = config
            .create_with_context(context)
            .map_err(|e| format!("the Kafka consumer cannot be made: {e}"))?;
        let topics: Vec<&str> = grant.topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .map_err(|e| format!("cannot subscribe to {}: {e}", topics.join(", ")))?;
        tracing::debug!(run_id = at.run_id, pipeline = at.pipeline, source = %describe, "Kafka source subscribed");
        Ok(Self(Arc::new(Inner {
            consumer,
            offsets,
            describe,
            last_commit: Mutex::new(Instant::now()),
            closed: AtomicBool::new(false),
            paused,
            polling: Mutex::new(()),
            kept: Mutex::new(Vec::new()),
        })))
    }
}

impl Inner {
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

    fn lock_polling(&self) -> std::sync::MutexGuard<'_, ()> {
        self.polling.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Delivery>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Poll while paused, when the connector does not (it waits to
    /// publish), until resumed or closed: the group keeps this member.
    fn keep(self: Arc<Self>) {
        while self.paused.load(Ordering::SeqCst) && !self.closed.load(Ordering::SeqCst) {
            let _polling = self.lock_polling();
            if let Some(Ok(record)) = self.consumer.poll(KEEPER_POLL) {
                let delivery = self.delivery(&record);
                self.kept().push(delivery);
            }
        }
    }
}

impl Source for KafkaSource {
    fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, ReceiveError> {
        let this = &self.0;
        if this.closed.load(Ordering::SeqCst) {
            return Err(ReceiveError::Stopping);
        }
        this.commit_due();
        if this.paused.load(Ordering::SeqCst) {
            // Nothing comes (the assignment is paused); the keeper polls.
            std::thread::sleep(wait.min(KEEPER_POLL));
            return Ok(Vec::new());
        }
        let _polling = this.lock_polling();
        let mut out = std::mem::take(&mut *this.kept());
        if !out.is_empty() {
            return Ok(out);
        }
        let mut timeout = wait;
        while out.len() < max {
            match this.consumer.poll(timeout) {
                None => break,
                Some(Ok(record)) => out.push(this.delivery(&record)),
                Some(Err(e)) => {
                    // A broker away, a partition's end: librdkafka goes on.
                    tracing::debug!(source = %this.describe, error = %e, "Kafka source poll");
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
        self.0.lock().settled(token);
    }

    fn close(&self) {
        let this = &self.0;
        if this.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let _polling = this.lock_polling();
        let (due, abandoned) = {
            let offsets = this.lock();
            (offsets.all(), offsets.in_flight())
        };
        commit(&this.consumer, &due, CommitMode::Sync, &this.describe);
        this.consumer.unsubscribe();
        tracing::info!(source = %this.describe, partitions = due.len(), abandoned, "Kafka source closed: what is done is committed, the rest is read again by the next run");
    }

    fn pause(&self) {
        let this = &self.0;
        if this.closed.load(Ordering::SeqCst) || this.paused.swap(true, Ordering::SeqCst) {
            return;
        }
        match this.consumer.assignment() {
            Ok(assignment) => {
                if let Err(e) = this.consumer.pause(&assignment) {
                    tracing::warn!(source = %this.describe, error = %e, "the assignment could not be paused");
                }
            }
            Err(e) => {
                tracing::warn!(source = %this.describe, error = %e, "the assignment is not known: not paused");
            }
        }
        let keeper = Arc::clone(this);
        let spawned = std::thread::Builder::new()
            .name("weir-kafka-keep".into())
            .spawn(move || keeper.keep());
        if let Err(e) = spawned {
            tracing::warn!(source = %this.describe, error = %e, "no keeper thread: a long pause may cost the group's membership");
        }
        tracing::info!(source = %this.describe, "paused: its partitions are not read until resumed");
    }

    fn resume(&self) {
        let this = &self.0;
        if !this.paused.swap(false, Ordering::SeqCst) {
            return;
        }
        // The keeper stops at its next poll; the assignment is resumed
        // with the polls held, so no poll sees half of it.
        let _polling = this.lock_polling();
        if let Ok(assignment) = this.consumer.assignment()
            && let Err(e) = this.consumer.resume(&assignment)
        {
            tracing::warn!(source = %this.describe, error = %e, "the assignment could not be resumed");
        }
        tracing::info!(source = %this.describe, "resumed");
    }

    fn describe(&self) -> String {
        self.0.describe.clone()
    }
}
