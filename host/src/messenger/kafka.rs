//! Kafka messengers: the only part of Weir that knows rdkafka.
//!
//! Topics, per pipeline: `<pipeline>_source` (publisher -> workers, keyed by
//! document id), `<pipeline>_dest` (workers -> indexers, keyed by id),
//! `<pipeline>_fail` (dead letters, with headers saying why), and
//! `<pipeline>_event_<run id>` (one partition, created by the runner).
//!
//! The guarantee is at-least-once with per-id order:
//!
//! - A worker stores a source offset only when the document is processed and
//!   every message it caused (outputs, dead letters, events) is acknowledged
//!   by the broker, and only up to the highest offset below which every record
//!   is complete. It polls many records and produces asynchronously; nothing
//!   waits on a single send.
//! - An indexer commits a batch's offsets only after the batch is indexed (or
//!   its failures dead-lettered) and its events delivered.
//! - On a rebalance, offsets are committed for completed work only.
//! - Ids are message keys at every hop, so one id stays on one partition, read
//!   by one consumer, in order.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::{
    Failure, IndexerMessenger, MessengerError, MessengerFactory, MessengerParts, Polled,
    PublisherMessenger, WorkerMessenger,
};
use crate::config::KafkaConfig;
use crate::document::Document;
use crate::event::Event;

mod hybrid;
pub use hybrid::HybridIndexerMessenger;

fn transport(e: impl std::fmt::Display) -> MessengerError {
    MessengerError::Transport(e.to_string())
}

/// Topic names and client settings for one pipeline.
#[derive(Debug, Clone)]
pub struct KafkaTopics {
    config: KafkaConfig,
    pipeline: String,
}

impl KafkaTopics {
    pub fn new(config: KafkaConfig, pipeline: &str) -> Self {
        Self {
            config,
            pipeline: pipeline.to_owned(),
        }
    }

    pub fn source(&self) -> String {
        self.config
            .source_topic
            .clone()
            .unwrap_or_else(|| format!("{}_source", self.pipeline))
    }

    pub fn dest(&self) -> String {
        format!("{}_dest", self.pipeline)
    }

    pub fn fail(&self) -> String {
        format!("{}_fail", self.pipeline)
    }

    /// Whether a message of `payload_bytes` fits `kafka.max_message_bytes`,
    /// with room for its key and headers.
    fn fits(&self, payload_bytes: usize) -> bool {
        payload_bytes + 4096 <= self.config.max_message_bytes
    }

    /// What a dead letter for `doc` carries: the document, or when it is too
    /// large for a Kafka message, only its id and run id (the headers say why).
    fn dead_letter_body(&self, doc: &Document) -> Vec<u8> {
        let json = doc.to_json_string();
        if self.fits(json.len()) {
            return json.into_bytes();
        }
        let mut stub = Document::new(doc.id());
        stub.set_run_id(doc.run_id().map(str::to_owned));
        stub.to_json_string().into_bytes()
    }

    /// Where events about documents of `run_id` go, if anywhere.
    pub fn events(&self, run_id: Option<&str>) -> Option<String> {
        if !self.config.events {
            return None;
        }
        match (&self.config.event_topic, run_id) {
            (Some(fixed), _) => Some(fixed.clone()),
            (None, Some(run_id)) => Some(format!("{}_event_{run_id}", self.pipeline)),
            (None, None) => None,
        }
    }

    fn client(&self, role: &BTreeMap<String, String>) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.config.bootstrap_servers);
        for (k, v) in self.config.client.iter().chain(role) {
            c.set(k, v);
        }
        c
    }

    fn producer_config(&self) -> ClientConfig {
        let mut c = self.client(&BTreeMap::new());
        c.set(
            "message.max.bytes",
            self.config.max_message_bytes.to_string(),
        )
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .set(
            "client.id",
            format!("weir-{}-{}", self.pipeline, std::process::id()),
        );
        for (k, v) in &self.config.producer {
            c.set(k, v);
        }
        c
    }

    fn consumer_config(&self, group: &str) -> ClientConfig {
        let mut c = self.client(&BTreeMap::new());
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false")
            .set(
                "fetch.message.max.bytes",
                self.config.max_message_bytes.to_string(),
            )
            .set(
                "max.poll.interval.ms",
                self.config.max_poll_interval.as_millis().to_string(),
            )
            .set("session.timeout.ms", "10000")
            // librdkafka pauses fetching for fetch.queue.backoff.ms (1 s by
            // default) once its prefetch queue is full, which stalls a busy
            // consumer for up to a second after it drains the queue.
            .set("fetch.queue.backoff.ms", "10")
            // Prefetch per partition: enough to keep a worker busy, not the
            // 100,000 documents of librdkafka's default.
            .set("queued.min.messages", "10000")
            // Notice topics created after subscribing within seconds, not minutes.
            .set("topic.metadata.refresh.interval.ms", "5000")
            .set(
                "client.id",
                format!("weir-{}-{}", self.pipeline, std::process::id()),
            );
        for (k, v) in &self.config.consumer {
            c.set(k, v);
        }
        c
    }

    pub fn worker_group(&self) -> String {
        self.config
            .worker_group_id
            .clone()
            .unwrap_or_else(|| format!("weir-{}-workers", self.pipeline))
    }

    pub fn indexer_group(&self) -> String {
        self.config
            .indexer_group_id
            .clone()
            .unwrap_or_else(|| format!("weir-{}-indexers", self.pipeline))
    }

    /// Create `topic` with `partitions` partitions unless it exists.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), MessengerError> {
        self.create_topics(&[(topic.to_owned(), partitions)])
    }

    /// Create each (topic, partitions) unless it exists, in one request.
    pub fn create_topics(&self, topics: &[(String, i32)]) -> Result<(), MessengerError> {
        if topics.is_empty() {
            return Ok(());
        }
        let admin: AdminClient<DefaultClientContext> = self
            .client(&self.config.admin)
            .create()
            .map_err(transport)?;
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|(t, partitions)| NewTopic::new(t, *partitions, TopicReplication::Fixed(1)))
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results =
            futures_executor::block_on(admin.create_topics(&new, &options)).map_err(transport)?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(transport(format!("cannot create topic {name}: {code}")));
                }
            }
        }
        Ok(())
    }

    /// The pipeline's source, destination and fail topics with
    /// `kafka.topic_partitions` partitions, to create where missing; none
    /// without that setting (topics are then left to the cluster's administrators).
    fn pipeline_topics(&self) -> Result<Vec<(String, i32)>, MessengerError> {
        let Some(partitions) = self.config.topic_partitions else {
            return Ok(Vec::new());
        };
        let partitions = i32::try_from(partitions).map_err(transport)?;
        Ok([self.source(), self.dest(), self.fail()]
            .into_iter()
            .map(|topic| (topic, partitions))
            .collect())
    }

    /// Create the pipeline's topics where missing (see `kafka.topic_partitions`).
    pub fn ensure_pipeline_topics(&self) -> Result<(), MessengerError> {
        self.create_topics(&self.pipeline_topics()?)
    }

    /// How many partitions `topic` has, if it exists.
    pub fn partitions(&self, topic: &str) -> Result<Option<usize>, MessengerError> {
        let consumer: BaseConsumer = self
            .client(&self.config.consumer)
            .create()
            .map_err(transport)?;
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(transport)?;
        Ok(metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| t.partitions().len()))
    }
}

/// A poll's error: transient ones (a topic not created yet, a broker
/// restarting) are logged and the poll counts as idle; fatal ones stop.
fn poll_error(e: KafkaError) -> Result<(), MessengerError> {
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
fn undecodable(
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

fn document_from(payload: Option<&[u8]>) -> Result<Document, String> {
    let text = std::str::from_utf8(payload.unwrap_or_default()).map_err(|e| e.to_string())?;
    Document::from_json_str(text).map_err(|e| e.to_string())
}

fn millis_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

// ---- delivery tracking ----

/// What one source record still waits for.
#[derive(Debug, Default)]
struct RecordState {
    outstanding: u32,
    processed: bool,
}

/// Per partition: records not yet complete, and the highest completed offset.
#[derive(Debug, Default)]
struct PartitionTrack {
    pending: BTreeMap<i64, RecordState>,
    highest_done: Option<i64>,
    /// Which ownership of the partition this is: a partition revoked and
    /// assigned again gets a new track, and late news about the records of
    /// an old one (acknowledgements, indexed batches) must not touch it.
    epoch: u64,
}

impl PartitionTrack {
    /// The next offset to commit: everything below it is complete.
    fn committable(&self) -> Option<i64> {
        match self.pending.first_key_value() {
            Some((&first, _)) => Some(first),
            None => self.highest_done.map(|o| o + 1),
        }
    }

    fn finish_if_complete(&mut self, offset: i64) {
        if let Some(state) = self.pending.get(&offset)
            && state.processed
            && state.outstanding == 0
        {
            self.pending.remove(&offset);
            self.highest_done = Some(self.highest_done.map_or(offset, |h| h.max(offset)));
        }
    }
}

/// Source records in flight, and the first delivery failure (after which no
/// offset may move again: the process must stop and let Kafka redeliver).
#[derive(Debug, Default)]
struct Tracker {
    /// Per consumer of the process and partition it owns.
    partitions: HashMap<(usize, i32), PartitionTrack>,
    /// Per indexer batch, its messages not yet acknowledged.
    batches: HashMap<u64, u32>,
    /// Per done Hybrid indexer batch still waiting for its messages: the
    /// source records it holds, released when they are acknowledged.
    holding: HashMap<u64, Vec<Origin>>,
    /// Consumers whose Hybrid indexer is gone: what they hold stays pending.
    orphaned: Vec<usize>,
    /// Tracks made so far (each gets the next number as its epoch).
    epochs: u64,
    failure: Option<String>,
    /// Messages produced and not yet acknowledged (or refused).
    in_flight: u64,
}

impl Tracker {
    /// A message for `tag` was handed to the producer.
    fn sent(&mut self, tag: Tag) {
        self.in_flight += 1;
        match tag {
            Tag::Record(origin) => self.hold(origin),
            Tag::Batch(batch) => *self.batches.entry(batch).or_default() += 1,
            Tag::Untracked => {}
        }
    }

    /// A message for `tag` was acknowledged or refused.
    fn settled(&mut self, tag: Tag) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match tag {
            Tag::Record(origin) => self.release(origin),
            Tag::Batch(batch) => {
                if let Some(left) = self.batches.get_mut(&batch) {
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        self.batches.remove(&batch);
                        for origin in self.holding.remove(&batch).unwrap_or_default() {
                            self.release(origin);
                        }
                    }
                }
            }
            Tag::Untracked => {}
        }
    }

    /// A record consumer `member` polled: pending until processed and
    /// everything it caused is done.
    fn polled(&mut self, member: usize, partition: i32, offset: i64) -> Origin {
        let next_epoch = self.epochs + 1;
        let track = self
            .partitions
            .entry((member, partition))
            .or_insert_with(|| PartitionTrack {
                epoch: next_epoch,
                ..PartitionTrack::default()
            });
        if track.epoch == next_epoch {
            self.epochs = next_epoch;
        }
        track.pending.insert(offset, RecordState::default());
        Origin {
            member,
            partition,
            offset,
            epoch: track.epoch,
        }
    }

    /// The track `origin` belongs to, unless the partition was revoked since.
    fn track_of(&mut self, origin: Origin) -> Option<&mut PartitionTrack> {
        self.partitions
            .get_mut(&origin.track())
            .filter(|t| t.epoch == origin.epoch)
    }

    /// Something `origin` waits for besides messages (its document on a
    /// Hybrid pair's queue) is now pending.
    fn hold(&mut self, origin: Origin) {
        if let Some(state) = self
            .track_of(origin)
            .and_then(|t| t.pending.get_mut(&origin.offset))
        {
            state.outstanding += 1;
        }
    }

    /// One thing `origin` waited for is done.
    fn release(&mut self, origin: Origin) {
        if let Some(track) = self.track_of(origin)
            && let Some(state) = track.pending.get_mut(&origin.offset)
        {
            state.outstanding = state.outstanding.saturating_sub(1);
            track.finish_if_complete(origin.offset);
        }
    }

    /// The worker is done with `origin` (its outputs are on their way).
    fn processed(&mut self, origin: Origin) {
        if let Some(track) = self.track_of(origin) {
            if let Some(state) = track.pending.get_mut(&origin.offset) {
                state.processed = true;
            }
            track.finish_if_complete(origin.offset);
        }
    }

    /// A Hybrid indexer finished `batch`, whose documents came from
    /// `origins`: release them once the batch's messages are acknowledged.
    fn batch_done(&mut self, batch: u64, origins: Vec<Origin>) {
        if self.batches.contains_key(&batch) {
            self.holding.insert(batch, origins);
        } else {
            for origin in origins {
                self.release(origin);
            }
        }
    }
}

/// Shared between a process's messengers and their producer's delivery callbacks.
#[derive(Debug, Default)]
struct Shared {
    tracker: Mutex<Tracker>,
    changed: Condvar,
    /// Numbers indexer batches, unique in the process.
    batch_numbers: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Tracker> {
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn next_batch(&self) -> u64 {
        self.batch_numbers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Wait until every message produced so far is acknowledged; false on
    /// timeout or after a delivery failure.
    fn wait_all_delivered(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut tracker = self.lock();
        while tracker.in_flight > 0 && tracker.failure.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            tracker = self
                .changed
                .wait_timeout(tracker, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        tracker.failure.is_none()
    }

    /// Wait until none of `batches` holds records any more (their messages
    /// are acknowledged); false on timeout or after a delivery failure.
    fn wait_released(&self, batches: &[u64], timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut tracker = self.lock();
        loop {
            if tracker.failure.is_some() {
                return false;
            }
            if batches.iter().all(|b| !tracker.holding.contains_key(b)) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            tracker = self
                .changed
                .wait_timeout(tracker, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Wait until no message caused by records of consumer `member` (of
    /// its `partitions`, or of all) is in flight.
    fn wait_delivered(&self, member: usize, partitions: Option<&[i32]>, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut tracker = self.lock();
        loop {
            let busy = tracker.partitions.iter().any(|(&(m, p), track)| {
                m == member
                    && partitions.is_none_or(|ps| ps.contains(&p))
                    && track.pending.values().any(|r| r.outstanding > 0)
            });
            if !busy || tracker.failure.is_some() || tracker.orphaned.contains(&member) {
                return !busy;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            tracker = self
                .changed
                .wait_timeout(tracker, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// A source record, read by consumer `member` of the process while it
/// owned the partition for the `epoch`th time.
#[derive(Debug, Clone, Copy)]
struct Origin {
    member: usize,
    partition: i32,
    offset: i64,
    epoch: u64,
}

impl Origin {
    fn track(self) -> (usize, i32) {
        (self.member, self.partition)
    }
}

/// What a produced message is accounted against.
#[derive(Debug, Clone, Copy)]
enum Tag {
    /// A worker's source record: its offset waits for the message.
    Record(Origin),
    /// An indexer's batch: its offsets wait for the message.
    Batch(u64),
    /// Nothing (the publisher's documents; a worker's message with no record).
    Untracked,
}

/// Producer callbacks: record acknowledgements against what waits for them.
struct Deliveries(Arc<Shared>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<Tag>;

    fn delivery(&self, result: &DeliveryResult<'_>, tag: Self::DeliveryOpaque) {
        let mut tracker = self.0.lock();
        if let Err((e, message)) = result {
            let failure = format!("delivery to {} failed: {e}", message.topic());
            tracing::error!("{failure}");
            tracker.failure.get_or_insert(failure);
        }
        tracker.settled(*tag);
        drop(tracker);
        self.0.changed.notify_all();
    }
}

/// A producer whose deliveries are accounted in `shared`.
fn shared_producer(
    topics: &KafkaTopics,
    shared: &Arc<Shared>,
) -> Result<ThreadedProducer<Deliveries>, MessengerError> {
    topics
        .producer_config()
        .create_with_context(Deliveries(Arc::clone(shared)))
        .map_err(transport)
}

/// Produce `payload`, accounted against `tag`, waiting for room in the
/// producer's queue.
fn produce(
    producer: &ThreadedProducer<Deliveries>,
    topic: &str,
    key: &str,
    payload: &[u8],
    headers: Option<OwnedHeaders>,
    tag: Tag,
) -> Result<(), MessengerError> {
    let mut record = BaseRecord::with_opaque_to(topic, Box::new(tag))
        .key(key)
        .payload(payload);
    if let Some(headers) = headers {
        record = record.headers(headers);
    }
    let shared = &producer.context().0;
    shared.lock().sent(tag);
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((e, _)) => {
                shared.lock().settled(tag);
                return Err(transport(format!("cannot produce to {topic}: {e}")));
            }
        }
    }
}

fn dead_letter_headers(failure: &Failure, source: Option<(&str, i32, i64)>) -> OwnedHeaders {
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
struct EventBuffer(BTreeMap<String, Vec<Event>>);

impl EventBuffer {
    /// Keep `event` for the topic it goes to, if it goes anywhere.
    fn push(&mut self, topics: &KafkaTopics, event: Event) {
        if let Some(topic) = topics.events(event.run_id.as_deref()) {
            self.0.entry(topic).or_default().push(event);
        }
    }

    /// Produce each topic's events as one message (a JSON array), accounted
    /// against `tag`.
    fn send(
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
fn events_from(payload: &[u8]) -> Result<Vec<Event>, serde_json::Error> {
    if payload.first() == Some(&b'[') {
        serde_json::from_slice(payload)
    } else {
        serde_json::from_slice(payload).map(|e| vec![e])
    }
}

/// Log a rebalance's outcome: which partitions this consumer now owns.
fn log_assignment(role: &str, rebalance: &Rebalance<'_>) {
    if let Rebalance::Assign(assigned) = rebalance {
        let partitions: Vec<i32> = assigned.elements().iter().map(|e| e.partition()).collect();
        tracing::info!(role, ?partitions, "partitions assigned");
    }
}

// ---- worker ----

/// Commits completed work when partitions are revoked.
struct WorkerRebalance {
    shared: Arc<Shared>,
    member: usize,
    topic: String,
    /// A Hybrid pair's revocations, shared with its indexer.
    pair: Option<Arc<Mutex<Revocations>>>,
}

impl ClientContext for WorkerRebalance {}

impl ConsumerContext for WorkerRebalance {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(revoked) = rebalance {
            let partitions: Vec<i32> = revoked.elements().iter().map(|e| e.partition()).collect();
            if !self
                .shared
                .wait_delivered(self.member, Some(&partitions), Duration::from_secs(30))
            {
                tracing::warn!(
                    "revoking partitions with deliveries still in flight; their records will be redelivered"
                );
            }
            let mut tracker = self.shared.lock();
            let tpl = committable_list(&tracker, &self.topic, self.member, Some(&partitions));
            for &p in &partitions {
                tracker.partitions.remove(&(self.member, p));
            }
            drop(tracker);
            // A Hybrid pair's indexer leaves what is still queued from these
            // partitions to their new owner (it is not committed).
            if let Some(pair) = &self.pair {
                pair.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .revoke(&partitions);
            }
            if tpl.count() > 0
                && let Err(e) = consumer.commit(&tpl, CommitMode::Sync)
            {
                tracing::warn!(error = %e, "commit on revoke failed; records will be redelivered");
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        log_assignment("worker", rebalance);
    }
}

/// Offsets consumer `member` may commit: for each partition it tracks (or
/// those listed), the offset below which every record is complete. Nothing
/// after a delivery failure.
fn committable_list(
    tracker: &Tracker,
    topic: &str,
    member: usize,
    only: Option<&[i32]>,
) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    if tracker.failure.is_some() {
        return tpl;
    }
    for (&(m, partition), track) in &tracker.partitions {
        if m != member || only.is_some_and(|ps| !ps.contains(&partition)) {
            continue;
        }
        if let Some(offset) = track.committable() {
            let _ = tpl.add_partition_offset(topic, partition, Offset::Offset(offset));
        }
    }
    tpl
}

/// A worker's messenger: consumes the source topic in the workers' group.
/// The worker threads of a process each have their own consumer (a member
/// of the group, owning its partitions) and share one producer.
pub struct KafkaWorkerMessenger {
    topics: KafkaTopics,
    source: String,
    output: Output,
    consumer: BaseConsumer<WorkerRebalance>,
    /// Which of the process's consumers this is.
    member: usize,
    producer: Arc<ThreadedProducer<Deliveries>>,
    shared: Arc<Shared>,
    current: Option<Origin>,
    events: EventBuffer,
    last_commit: Instant,
    committed: HashMap<i32, i64>,
}

impl std::fmt::Debug for KafkaWorkerMessenger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaWorkerMessenger")
            .field("source", &self.source)
            .field("member", &self.member)
            .finish_non_exhaustive()
    }
}

/// Where a worker's processed documents go.
enum Output {
    /// The destination topic, read by the indexers' group.
    Topic(String),
    /// The paired indexer's queue (Hybrid mode), until the worker stops.
    Pair {
        queue: Option<crossbeam_channel::Sender<Queued>>,
        revocations: Arc<Mutex<Revocations>>,
    },
}

/// A processed document on its way to a Hybrid pair's indexer.
struct Queued {
    doc: Document,
    origin: Origin,
    /// Revocations of the pair when it was polled.
    generation: u64,
}

/// How often a busy worker or indexer commits its progress: often enough
/// that a crash redelivers little, seldom enough to cost the broker little.
const COMMIT_INTERVAL: Duration = Duration::from_millis(200);

impl KafkaWorkerMessenger {
    /// The messengers of `threads` worker threads: a consumer each, one
    /// producer between them (fewer clients, fuller batches).
    pub fn for_threads(topics: &KafkaTopics, threads: usize) -> Result<Vec<Self>, MessengerError> {
        let shared = Arc::new(Shared::default());
        let producer = Arc::new(shared_producer(topics, &shared)?);
        (0..threads)
            .map(|member| {
                Self::member(
                    topics,
                    member,
                    &producer,
                    &shared,
                    Output::Topic(topics.dest()),
                )
            })
            .collect()
    }

    /// A worker thread's messenger: consumer `member` of the process.
    fn member(
        topics: &KafkaTopics,
        member: usize,
        producer: &Arc<ThreadedProducer<Deliveries>>,
        shared: &Arc<Shared>,
        output: Output,
    ) -> Result<Self, MessengerError> {
        let source = topics.source();
        let pair = match &output {
            Output::Pair { revocations, .. } => Some(Arc::clone(revocations)),
            Output::Topic(_) => None,
        };
        let consumer: BaseConsumer<WorkerRebalance> = topics
            .consumer_config(&topics.worker_group())
            .create_with_context(WorkerRebalance {
                shared: Arc::clone(shared),
                member,
                topic: source.clone(),
                pair,
            })
            .map_err(transport)?;
        consumer.subscribe(&[&source]).map_err(transport)?;
        Ok(Self {
            topics: topics.clone(),
            source,
            output,
            consumer,
            member,
            producer: Arc::clone(producer),
            shared: Arc::clone(shared),
            current: None,
            events: EventBuffer::default(),
            last_commit: Instant::now(),
            committed: HashMap::default(),
        })
    }

    fn produce_for_current(
        &self,
        topic: &str,
        key: &str,
        payload: &[u8],
        headers: Option<OwnedHeaders>,
    ) -> Result<(), MessengerError> {
        let tag = self.current.map_or(Tag::Untracked, Tag::Record);
        produce(&self.producer, topic, key, payload, headers, tag)
    }

    /// Commit, at most every [`COMMIT_INTERVAL`], what is complete.
    fn commit(&mut self) -> Result<(), MessengerError> {
        if self.last_commit.elapsed() < COMMIT_INTERVAL {
            return Ok(());
        }
        self.last_commit = Instant::now();
        let tracker = self.shared.lock();
        if let Some(failure) = &tracker.failure {
            return Err(transport(failure));
        }
        let complete = committable_list(&tracker, &self.source, self.member, None);
        drop(tracker);
        // Only what moved since the last commit.
        let mut moved = TopicPartitionList::new();
        for e in complete.elements() {
            if let Offset::Offset(offset) = e.offset()
                && self.committed.insert(e.partition(), offset) != Some(offset)
            {
                let _ = moved.add_partition_offset(&self.source, e.partition(), e.offset());
            }
        }
        if moved.count() > 0 {
            self.consumer
                .commit(&moved, CommitMode::Async)
                .map_err(transport)?;
        }
        Ok(())
    }
}

impl WorkerMessenger for KafkaWorkerMessenger {
    fn poll_doc_to_process(
        &mut self,
        timeout: Duration,
    ) -> Result<Polled<Document>, MessengerError> {
        loop {
            let Some(message) = self.consumer.poll(timeout) else {
                self.commit()?;
                return Ok(Polled::Idle);
            };
            let message = match message {
                Ok(message) => message,
                Err(e) => {
                    poll_error(e)?;
                    return Ok(Polled::Idle);
                }
            };
            let origin =
                self.shared
                    .lock()
                    .polled(self.member, message.partition(), message.offset());
            self.current = Some(origin);
            match document_from(message.payload()) {
                Ok(doc) => return Ok(Polled::Item(doc)),
                Err(e) => {
                    // Not a document: dead-letter the raw bytes, never drop them.
                    let (key, payload, headers) = undecodable(&message, &e, &self.source);
                    let fail = self.topics.fail();
                    self.produce_for_current(&fail, &key, &payload, Some(headers))?;
                    self.commit_pending_doc_offsets()?;
                }
            }
        }
    }

    fn send_for_indexing(&mut self, doc: Document) -> Result<(), MessengerError> {
        match &self.output {
            Output::Topic(dest) => {
                let json = doc.to_json_string();
                if self.topics.fits(json.len()) {
                    return self.produce_for_current(dest, doc.id(), json.as_bytes(), None);
                }
                // Too large for the destination topic: the document fails,
                // rather than the worker (which would crash on it forever).
                let failure = Failure {
                    plugin: "kafka".into(),
                    message: format!(
                        "the document is {} bytes, over kafka.max_message_bytes ({})",
                        json.len(),
                        self.topics.config.max_message_bytes
                    ),
                    attempts: 1,
                };
                tracing::warn!(doc_id = doc.id(), message = %failure.message, "document failed");
                let event = Event::new(&doc, crate::event::EventKind::Fail)
                    .with_message(failure.message.clone());
                self.send_failed(doc, &failure)?;
                self.send_event(event)
            }
            Output::Pair { queue, revocations } => {
                let (Some(queue), Some(origin)) = (queue, self.current) else {
                    return Err(MessengerError::Closed("indexer"));
                };
                // Held until the indexer is done with it (and its events are
                // acknowledged): only then may the record's offset be committed.
                self.shared.lock().hold(origin);
                let generation = revocations
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .count;
                let queued = Queued {
                    doc,
                    origin,
                    generation,
                };
                queue.send(queued).map_err(|_| {
                    self.shared.lock().release(origin);
                    MessengerError::Closed("indexer")
                })
            }
        }
    }

    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError> {
        let headers = self
            .current
            .map(|o| dead_letter_headers(failure, Some((&self.source, o.partition, o.offset))))
            .unwrap_or_else(|| dead_letter_headers(failure, None));
        let fail = self.topics.fail();
        let body = self.topics.dead_letter_body(&doc);
        self.produce_for_current(&fail, doc.id(), &body, Some(headers))
    }

    fn send_event(&mut self, event: Event) -> Result<(), MessengerError> {
        self.events.push(&self.topics, event);
        Ok(())
    }

    fn commit_pending_doc_offsets(&mut self) -> Result<(), MessengerError> {
        // The document's events go out together, counted against its record.
        let tag = self.current.map_or(Tag::Untracked, Tag::Record);
        self.events.send(&self.producer, tag)?;
        if let Some(origin) = self.current.take() {
            self.shared.lock().processed(origin);
        }
        self.commit()
    }
}

impl Drop for KafkaWorkerMessenger {
    fn drop(&mut self) {
        // Finish what was sent, commit what is complete, leave the group. A
        // Hybrid pair's indexer sees its queue close, and indexes what is on it.
        if let Output::Pair { queue, .. } = &mut self.output {
            queue.take();
        }
        let _ = self.producer.flush(Duration::ZERO);
        if !self
            .shared
            .wait_delivered(self.member, None, Duration::from_secs(30))
        {
            tracing::warn!("deliveries unfinished at shutdown; their records will be redelivered");
        }
        let tpl = committable_list(&self.shared.lock(), &self.source, self.member, None);
        if tpl.count() > 0
            && let Err(e) = self.consumer.commit(&tpl, CommitMode::Sync)
        {
            tracing::warn!(error = %e, "final commit failed; records will be redelivered");
        }
        self.consumer.unsubscribe();
    }
}

// ---- indexer ----

/// What an indexer may commit: the offsets it has polled, and the batches
/// that are done but whose messages (events, dead letters) are not all
/// acknowledged yet. A batch's offsets are committed once its messages and
/// those of every earlier batch are on the broker; the indexer never waits
/// for that, it goes on with the next batch.
#[derive(Debug, Default)]
struct IndexerProgress {
    /// Next offset per partition after everything polled so far.
    polled: HashMap<i32, i64>,
    /// Done batches, oldest first, with the offsets they complete.
    unacked: std::collections::VecDeque<(u64, HashMap<i32, i64>)>,
}

impl IndexerProgress {
    /// Take the oldest batches whose messages are all acknowledged; the
    /// offsets they complete. Nothing after a delivery failure.
    fn take_acked(&mut self, tracker: &Tracker) -> HashMap<i32, i64> {
        let mut offsets = HashMap::default();
        if tracker.failure.is_some() {
            return offsets;
        }
        while let Some((batch, _)) = self.unacked.front()
            && !tracker.batches.contains_key(batch)
        {
            if let Some((_, done)) = self.unacked.pop_front() {
                offsets.extend(done);
            }
        }
        offsets
    }

    /// Forget `partitions`: another indexer owns them now.
    fn forget(&mut self, partitions: &[i32]) {
        self.polled.retain(|p, _| !partitions.contains(p));
        for (_, offsets) in &mut self.unacked {
            offsets.retain(|p, _| !partitions.contains(p));
        }
    }
}

fn offsets_list(topic: &str, offsets: &HashMap<i32, i64>) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (&partition, &next) in offsets {
        let _ = tpl.add_partition_offset(topic, partition, Offset::Offset(next));
    }
    tpl
}

/// An indexer's messenger: consumes the destination topic; commits a batch's
/// offsets only once the batch is done and its events are delivered.
pub struct KafkaIndexerMessenger {
    topics: KafkaTopics,
    dest: String,
    consumer: BaseConsumer<IndexerRebalance>,
    producer: ThreadedProducer<Deliveries>,
    shared: Arc<Shared>,
    progress: Arc<Mutex<IndexerProgress>>,
    /// The batch being built: its messages are accounted against it.
    batch: u64,
    /// The partition of each document returned since the last batch, and how
    /// many revocations had happened when it was polled.
    batch_partitions: Vec<(i32, u64)>,
    /// Revocations so far, and per partition the count at its latest one.
    revoked: Arc<Mutex<Revocations>>,
    events: EventBuffer,
    current: Option<(i32, i64)>,
    last_commit: Instant,
}

impl std::fmt::Debug for KafkaIndexerMessenger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaIndexerMessenger")
            .field("dest", &self.dest)
            .finish_non_exhaustive()
    }
}

/// On revocation the indexer commits what is done, forgets what it polled
/// from those partitions (it will not commit it), and notes them, so that
/// their documents are taken out of the batch being built: the new owner
/// indexes them.
struct IndexerRebalance {
    dest: String,
    shared: Arc<Shared>,
    progress: Arc<Mutex<IndexerProgress>>,
    revoked: Arc<Mutex<Revocations>>,
}

/// Revocations seen by an indexer, to tell documents polled before their
/// partition was revoked (the new owner has them) from those polled after it
/// came back (ours).
#[derive(Debug, Default)]
struct Revocations {
    count: u64,
    latest: HashMap<i32, u64>,
}

impl Revocations {
    fn revoke(&mut self, partitions: &[i32]) {
        self.count += 1;
        for &p in partitions {
            self.latest.insert(p, self.count);
        }
    }

    /// Take out of `batch` the documents whose partition was revoked after
    /// they were polled; `polled` is each one's (partition, generation), in
    /// order. Their partition's new owner indexes them (from the committed
    /// offset, which they are not below).
    fn drop_revoked(
        &self,
        batch: &mut Vec<Document>,
        polled: impl ExactSizeIterator<Item = (i32, u64)>,
    ) {
        if self.latest.is_empty() {
            return;
        }
        if batch.len() != polled.len() {
            tracing::warn!("batch and polled documents disagree; keeping the batch");
            return;
        }
        let before = batch.len();
        let mut polled = polled;
        batch.retain(|_| {
            polled
                .next()
                .is_none_or(|(p, generation)| !self.revoked_since(p, generation))
        });
        if batch.len() < before {
            tracing::info!(
                dropped = before - batch.len(),
                "left documents of revoked partitions to their new owner"
            );
        }
    }

    /// Whether a document of `partition` polled at `generation` was revoked since.
    fn revoked_since(&self, partition: i32, generation: u64) -> bool {
        self.latest
            .get(&partition)
            .is_some_and(|&revoked_at| revoked_at > generation)
    }
}

impl ClientContext for IndexerRebalance {}

impl ConsumerContext for IndexerRebalance {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else {
            return;
        };
        let partitions: Vec<i32> = revoked.elements().iter().map(|e| e.partition()).collect();
        if !self.shared.wait_all_delivered(Duration::from_secs(30)) {
            tracing::warn!(
                "revoking partitions with deliveries still in flight; their documents will be redelivered"
            );
        }
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let done = progress.take_acked(&self.shared.lock());
        progress.forget(&partitions);
        drop(progress);
        if !done.is_empty()
            && let Err(e) = consumer.commit(&offsets_list(&self.dest, &done), CommitMode::Sync)
        {
            tracing::warn!(error = %e, "commit on revoke failed; documents will be redelivered");
        }
        self.revoked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .revoke(&partitions);
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        log_assignment("indexer", rebalance);
    }
}

impl KafkaIndexerMessenger {
    pub fn new(topics: KafkaTopics) -> Result<Self, MessengerError> {
        let shared = Arc::new(Shared::default());
        let batch = shared.next_batch();
        let progress = Arc::new(Mutex::new(IndexerProgress::default()));
        let revoked = Arc::new(Mutex::new(Revocations::default()));
        let dest = topics.dest();
        let consumer: BaseConsumer<IndexerRebalance> = topics
            .consumer_config(&topics.indexer_group())
            .create_with_context(IndexerRebalance {
                dest: dest.clone(),
                shared: Arc::clone(&shared),
                progress: Arc::clone(&progress),
                revoked: Arc::clone(&revoked),
            })
            .map_err(transport)?;
        consumer.subscribe(&[&dest]).map_err(transport)?;
        let producer = shared_producer(&topics, &shared)?;
        Ok(Self {
            topics,
            dest,
            consumer,
            producer,
            shared,
            progress,
            batch,
            batch_partitions: Vec::new(),
            revoked,
            events: EventBuffer::default(),
            current: None,
            last_commit: Instant::now(),
        })
    }

    /// Commit the offsets of the batches now fully acknowledged, when busy at
    /// most every [`COMMIT_INTERVAL`]; an error once a delivery failed
    /// (nothing moves after that).
    fn commit_acked(&mut self, mode: CommitMode, busy: bool) -> Result<(), MessengerError> {
        if busy && self.last_commit.elapsed() < COMMIT_INTERVAL {
            return self
                .shared
                .lock()
                .failure
                .as_ref()
                .map_or(Ok(()), |f| Err(transport(f)));
        }
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let tracker = self.shared.lock();
        if let Some(failure) = &tracker.failure {
            return Err(transport(failure));
        }
        let done = progress.take_acked(&tracker);
        drop((tracker, progress));
        if done.is_empty() {
            return Ok(());
        }
        self.last_commit = Instant::now();
        // A lost asynchronous commit is covered by the next one, or redelivers.
        self.consumer
            .commit(&offsets_list(&self.dest, &done), mode)
            .map_err(transport)
    }
}

impl IndexerMessenger for KafkaIndexerMessenger {
    fn poll_doc_to_index(&mut self, timeout: Duration) -> Result<Polled<Document>, MessengerError> {
        loop {
            let Some(message) = self.consumer.poll(timeout) else {
                self.commit_acked(CommitMode::Async, false)?;
                return Ok(Polled::Idle);
            };
            let message = match message {
                Ok(message) => message,
                Err(e) => {
                    poll_error(e)?;
                    return Ok(Polled::Idle);
                }
            };
            let (partition, offset) = (message.partition(), message.offset());
            self.progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .polled
                .insert(partition, offset + 1);
            self.current = Some((partition, offset));
            match document_from(message.payload()) {
                Ok(doc) => {
                    let generation = self
                        .revoked
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .count;
                    self.batch_partitions.push((partition, generation));
                    return Ok(Polled::Item(doc));
                }
                Err(e) => {
                    let (key, payload, headers) = undecodable(&message, &e, &self.dest);
                    let fail = self.topics.fail();
                    let tag = Tag::Batch(self.batch);
                    produce(&self.producer, &fail, &key, &payload, Some(headers), tag)?;
                }
            }
        }
    }

    fn send_event(&mut self, event: Event) -> Result<(), MessengerError> {
        self.events.push(&self.topics, event);
        Ok(())
    }

    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError> {
        let headers = dead_letter_headers(
            failure,
            self.current.map(|(p, o)| (self.dest.as_str(), p, o)),
        );
        let fail = self.topics.fail();
        let body = self.topics.dead_letter_body(&doc);
        produce(
            &self.producer,
            &fail,
            doc.id(),
            &body,
            Some(headers),
            Tag::Batch(self.batch),
        )
    }

    fn drop_revoked(&mut self, batch: &mut Vec<Document>) {
        let revocations = self.revoked.lock().unwrap_or_else(PoisonError::into_inner);
        revocations.drop_revoked(batch, self.batch_partitions.iter().copied());
    }

    fn batch_complete(&mut self, _batch: &[Document]) -> Result<(), MessengerError> {
        self.batch_partitions.clear();
        self.revoked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .latest
            .clear();
        // The batch's events travel as one message per event topic.
        self.events.send(&self.producer, Tag::Batch(self.batch))?;
        // The indexer sends batches in poll order, so everything polled so far
        // is done once this batch's messages are acknowledged.
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let polled = progress.polled.clone();
        progress.unacked.push_back((self.batch, polled));
        drop(progress);
        self.batch = self.shared.next_batch();
        self.commit_acked(CommitMode::Async, true)
    }
}

impl Drop for KafkaIndexerMessenger {
    fn drop(&mut self) {
        // Commit every batch whose messages reach the broker; the batch being
        // built (if any) is left to be redelivered.
        if self.shared.wait_all_delivered(Duration::from_secs(30)) {
            let _ = self.commit_acked(CommitMode::Sync, false);
        } else {
            tracing::warn!(
                "deliveries unfinished at shutdown; their documents will be redelivered"
            );
        }
        self.consumer.unsubscribe();
    }
}

// ---- publisher ----

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

/// The runner's messengers in Kafka mode: a publisher only; workers and
/// indexers are separate processes.
#[derive(Debug, Clone)]
pub struct KafkaMessengers {
    pub config: KafkaConfig,
}

impl MessengerFactory for KafkaMessengers {
    fn create(
        &self,
        pipeline: &str,
        _workers: usize,
        run_id: &str,
    ) -> Result<MessengerParts, MessengerError> {
        let topics = KafkaTopics::new(self.config.clone(), pipeline);
        Ok(MessengerParts {
            publisher: Box::new(KafkaPublisherMessenger::new(&topics, run_id)?),
            workers: Vec::new(),
            indexer: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_contiguously_complete_offsets_are_committable() {
        let mut track = PartitionTrack::default();
        for offset in 10..14 {
            track.pending.insert(offset, RecordState::default());
        }
        assert_eq!(track.committable(), Some(10));
        // 11 and 12 complete before 10: nothing moves.
        for offset in [11, 12] {
            track.pending.get_mut(&offset).expect("tracked").processed = true;
            track.finish_if_complete(offset);
        }
        assert_eq!(track.committable(), Some(10));
        // 10 has an output in flight: still nothing.
        let state = track.pending.get_mut(&10).expect("tracked");
        state.processed = true;
        state.outstanding = 1;
        track.finish_if_complete(10);
        assert_eq!(track.committable(), Some(10));
        track.pending.get_mut(&10).expect("tracked").outstanding = 0;
        track.finish_if_complete(10);
        assert_eq!(track.committable(), Some(13), "10..=12 done, 13 pending");
        track.pending.get_mut(&13).expect("tracked").processed = true;
        track.finish_if_complete(13);
        assert_eq!(track.committable(), Some(14));
    }

    #[test]
    fn news_about_a_revoked_partitions_records_does_not_touch_its_next_owner() {
        let mut tracker = Tracker::default();
        let old = tracker.polled(0, 3, 10);
        tracker.hold(old);
        tracker.processed(old);
        // Revoked (its track dropped) and assigned again: offset 10 is re-read.
        tracker.partitions.remove(&(0, 3));
        let new = tracker.polled(0, 3, 10);
        assert_ne!(old.epoch, new.epoch);
        tracker.hold(new);
        tracker.processed(new);
        // The old record's document is indexed late: it must not complete the new one.
        tracker.release(old);
        let track = &tracker.partitions[&(0, 3)];
        assert_eq!(track.committable(), Some(10), "offset 10 is still pending");
        tracker.release(new);
        assert_eq!(tracker.partitions[&(0, 3)].committable(), Some(11));
    }

    #[test]
    fn topic_names_follow_the_pipeline() {
        let mut config = KafkaConfig::new("127.0.0.1:9092");
        let topics = KafkaTopics::new(config.clone(), "books");
        assert_eq!(topics.source(), "books_source");
        assert_eq!(topics.dest(), "books_dest");
        assert_eq!(topics.fail(), "books_fail");
        assert_eq!(topics.events(Some("r1")).as_deref(), Some("books_event_r1"));
        assert_eq!(topics.events(None), None);
        config.event_topic = Some("all_events".into());
        config.source_topic = Some("incoming".into());
        let topics = KafkaTopics::new(config.clone(), "books");
        assert_eq!(topics.events(None).as_deref(), Some("all_events"));
        assert_eq!(topics.source(), "incoming");
        config.events = false;
        assert_eq!(KafkaTopics::new(config, "books").events(Some("r1")), None);
    }
}
