//! The worker role: consumes the source topic in the workers' group.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use foldhash::HashMap;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Message, OwnedHeaders};
use rdkafka::producer::{Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client::{commit_failed, polled};
use super::delivery::{Deliveries, Origin, Shared, Tag, produce, shared_producer};
use super::delivery_count::Delivery;
use super::fence::Place;
use super::hybrid::HybridIndexerMessenger;
use super::output::{Output, Queued};
use super::revocations::Revocations;
use super::solo::Hand;
use super::wire::{
    EventBuffer, Pass, dead_letter, document_from, document_headers, fail_event, raw_dead_letter,
    too_large, undecodable, undecodable_event, with_origin,
};
use super::worker_rebalance::{WorkerRebalance, committable_list};
use super::{COMMIT_INTERVAL, KafkaTopics, transport};
use crate::core::document::Document;
use crate::core::event::Event;
use crate::messenger::{Failure, MessengerError, Polled, WorkerMessenger};

/// A worker's messenger: consumes the source topic in the workers' group.
/// The worker threads of a process each have their own consumer (a member
/// of the group, owning its partitions) and share one producer.
pub struct KafkaWorkerMessenger {
    pub(super) topics: KafkaTopics,
    pub(super) source: String,
    pub(super) output: Output,
    pub(super) consumer: BaseConsumer<WorkerRebalance>,
    /// Which of the process's consumers this is.
    pub(super) member: usize,
    pub(super) producer: Arc<ThreadedProducer<Deliveries>>,
    pub(super) shared: Arc<Shared>,
    pub(super) current: Option<Origin>,
    pub(super) events: EventBuffer,
    /// The pass over the current record: ties its outputs to its CREATEs.
    pub(super) pass: Pass,
    pub(super) last_commit: Instant,
    pub(super) committed: HashMap<i32, i64>,
    /// The partition whose first record since its assignment is being
    /// processed, with a delivery count committed for it (poison pills).
    pub(super) probation: Option<i32>,
    /// How this thread holds the record it is processing, if any.
    pub(super) hand: Option<Hand>,
}

impl std::fmt::Debug for KafkaWorkerMessenger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaWorkerMessenger")
            .field("source", &self.source)
            .field("member", &self.member)
            .finish_non_exhaustive()
    }
}

impl KafkaWorkerMessenger {
    /// The messengers of `threads` worker threads: a consumer each, one
    /// producer between them (fewer clients, fuller batches).
    pub fn for_threads(topics: &KafkaTopics, threads: usize) -> Result<Vec<Self>, MessengerError> {
        let shared = Arc::new(Shared::default());
        shared.solo.set_members(threads);
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

    /// `pairs` Hybrid pairs (a worker and its indexer): a consumer and a
    /// queue of `capacity` documents each, one producer for all.
    pub fn hybrid_pairs(
        topics: &KafkaTopics,
        pairs: usize,
        capacity: usize,
    ) -> Result<Vec<(KafkaWorkerMessenger, HybridIndexerMessenger)>, MessengerError> {
        let shared = Arc::new(Shared::default());
        shared.solo.set_members(pairs);
        let producer = Arc::new(shared_producer(topics, &shared)?);
        (0..pairs)
            .map(|member| {
                let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
                let revocations = Arc::new(Mutex::new(Revocations::default()));
                let output = Output::Hybrid {
                    queue: Some(tx),
                    revocations: Arc::clone(&revocations),
                };
                let worker = Self::member(topics, member, &producer, &shared, output)?;
                let indexer = HybridIndexerMessenger::new(
                    member,
                    topics,
                    rx,
                    &producer,
                    &shared,
                    revocations,
                );
                Ok((worker, indexer))
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
            Output::Hybrid { revocations, .. } => Some(Arc::clone(revocations)),
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
            pass: Pass::default(),
            last_commit: Instant::now(),
            committed: HashMap::default(),
            probation: None,
            hand: None,
        })
    }

    pub(super) fn produce_for_current(
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
    pub(super) fn commit(&mut self) -> Result<(), MessengerError> {
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
        if moved.count() > 0
            && let Err(e) = self.consumer.commit(&moved, CommitMode::Async)
        {
            // Not a lost document: the next commit covers these offsets
            // (they are asked again), or a crash redelivers their records.
            commit_failed(&e);
            self.committed.clear();
        }
        Ok(())
    }
}

impl KafkaWorkerMessenger {
    /// How many times the record at `offset` of `partition`, the first this
    /// consumer got since the partition was assigned, has now been
    /// delivered, counting this time; the count is committed (with the
    /// offset, so nothing moves) before the record is processed. A record
    /// is counted only while it is the first one of a fresh assignment and
    /// nothing after it was committed: only a record that killed its
    /// workers before they finished it accumulates deliveries.
    fn count_delivery(&self, partition: i32, offset: i64) -> Delivery {
        let timeout = Duration::from_secs(10);
        let mut asked = TopicPartitionList::new();
        asked.add_partition(&self.source, partition);
        let before = match self.consumer.committed_offsets(asked, timeout) {
            Ok(committed) => committed
                .find_partition(&self.source, partition)
                .filter(|e| e.offset() == Offset::Offset(offset))
                .and_then(|e| Delivery::parse(e.metadata()))
                .unwrap_or_default(),
            Err(e) => {
                tracing::warn!(partition, error = %e, "cannot read the delivery count; counting this delivery as the first");
                Delivery::default()
            }
        };
        let max = self.topics.config.max_deliveries;
        let this = Delivery {
            count: before.count + 1,
            // Past the limit it goes alone (it is then the only record this
            // process has in hand): a crash then is surely its own.
            alone: self.shared.solo.always_alone() || before.count + 1 > max,
            died_alone: before.died_alone || before.alone,
        };
        // Alone is recorded only once the record is held alone: one waiting
        // for its turn when the process dies was not alone.
        let always = self.shared.solo.always_alone();
        self.record_delivery(
            partition,
            offset,
            Delivery {
                alone: always,
                ..this
            },
        );
        this
    }

    /// Commit `delivery` as the metadata of `offset` (which stays where it is).
    fn record_delivery(&self, partition: i32, offset: i64, delivery: Delivery) {
        let mut count = TopicPartitionList::new();
        let mut entry = count.add_partition(&self.source, partition);
        if entry.set_offset(Offset::Offset(offset)).is_ok() {
            entry.set_metadata(delivery.metadata());
            if let Err(e) = self.consumer.commit(&count, CommitMode::Sync) {
                tracing::warn!(partition, error = %e, "cannot record the delivery count");
            }
        }
    }

    /// The first record of `partition` since its assignment is done: commit
    /// past it now (which clears its delivery count), so that a crash on a
    /// later record never counts against this one.
    fn end_probation(&mut self, partition: i32) {
        if !self
            .shared
            .wait_delivered(self.member, Some(&[partition]), Duration::from_secs(30))
        {
            return;
        }
        let tpl = committable_list(
            &self.shared.lock(),
            &self.source,
            self.member,
            Some(&[partition]),
        );
        for e in tpl.elements() {
            if let Offset::Offset(offset) = e.offset() {
                self.committed.insert(e.partition(), offset);
            }
        }
        if tpl.count() > 0
            && let Err(e) = self.consumer.commit(&tpl, CommitMode::Sync)
        {
            commit_failed(&e);
            self.committed.clear();
        }
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
            let Some(message) = polled(message)? else {
                return Ok(Polled::Idle);
            };
            self.pass.start();
            let (partition, offset) = (message.partition(), message.offset());
            let fresh = {
                let mut tracker = self.shared.lock();
                let fresh = !tracker.partitions.contains_key(&(self.member, partition));
                self.current = Some(tracker.polled(self.member, partition, offset));
                fresh
            };
            let max = self.topics.config.max_deliveries;
            let mut hand = Hand::Shared;
            let mut suspect = None;
            if fresh && max > 0 {
                let delivery = self.count_delivery(partition, offset);
                let deliveries = delivery.count;
                self.committed.insert(partition, offset);
                if delivery.alone {
                    hand = Hand::Alone;
                    suspect = Some(delivery);
                }
                if deliveries > max && delivery.died_alone {
                    // The workers before died on it: never again.
                    let failure = Failure {
                        plugin: "kafka".into(),
                        message: format!(
                            "quarantined: delivered {} times and never finished, the last time alone in its worker process (its worker died on it: an abort, an out-of-memory kill?); kafka.max_deliveries is {max}",
                            deliveries - 1
                        ),
                        attempts: deliveries - 1,
                        reason: None,
                    };
                    tracing::error!(partition, offset, "{}", failure.message);
                    let (key, payload, headers) = raw_dead_letter(&message, &failure, &self.source);
                    let fail = self.topics.fail();
                    self.produce_for_current(&fail, &key, &payload, Some(headers))?;
                    if let Some(event) = fail_event(&message, failure.message) {
                        self.events.push(&self.topics, event);
                    }
                    self.probation = Some(partition);
                    self.commit_pending_doc_offsets()?;
                    continue;
                }
                self.probation = Some(partition);
            }
            match document_from(message.payload()) {
                Ok(doc) => {
                    self.shared.solo.take(hand);
                    self.hand = Some(hand);
                    if let Some(delivery) = suspect
                        && !self.shared.solo.always_alone()
                    {
                        self.record_delivery(partition, offset, delivery);
                        tracing::warn!(
                            partition,
                            offset,
                            deliveries = delivery.count,
                            "a record whose workers died with it in hand is processed alone"
                        );
                    }
                    return Ok(Polled::Item(doc));
                }
                Err(e) => {
                    // Not a document: dead-letter the raw bytes, never drop
                    // them, and fail its id (the key) in its run.
                    tracing::warn!(partition = message.partition(), offset = message.offset(), error = %e, "a source message is not a Weir document; dead-lettered");
                    let (key, payload, headers) = undecodable(&message, &e, &self.source);
                    let fail = self.topics.fail();
                    self.produce_for_current(&fail, &key, &payload, Some(headers))?;
                    if let Some(event) = undecodable_event(&message, &e) {
                        self.events.push(&self.topics, event);
                    }
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
                    let mut headers = document_headers(doc.run_id(), self.pass.lineage());
                    if let Some(origin) = self.current {
                        headers = with_origin(
                            headers,
                            Place {
                                partition: origin.partition,
                                offset: origin.offset,
                            },
                        );
                    }
                    return self.produce_for_current(
                        dest,
                        doc.id(),
                        json.as_bytes(),
                        Some(headers),
                    );
                }
                // Too large for the destination topic: the document fails,
                // rather than the worker (which would crash on it forever).
                let failure = too_large(&self.topics, json.len());
                tracing::warn!(doc_id = doc.id(), message = %failure.message, "document failed");
                let event = Event::new(&doc, crate::core::event::EventKind::Fail)
                    .with_message(failure.message.clone());
                self.send_failed(doc, &failure)?;
                self.send_event(event)
            }
            Output::Hybrid { queue, revocations } => {
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
                    lineage: self.pass.lineage(),
                };
                queue.send(queued).map_err(|_| {
                    self.shared.lock().release(origin);
                    MessengerError::Closed("indexer")
                })
            }
        }
    }

    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError> {
        let source = self
            .current
            .map(|o| (self.source.as_str(), o.partition, o.offset));
        let tag = self.current.map_or(Tag::Untracked, Tag::Record);
        dead_letter(&self.producer, &self.topics, &doc, failure, source, tag)
    }

    fn send_event(&mut self, mut event: Event) -> Result<(), MessengerError> {
        self.pass.stamp(&mut event);
        self.events.push(&self.topics, event);
        Ok(())
    }

    /// One record at a time: what is sent on, its events, its delivery
    /// count and its place among the threads that may die with it are all
    /// tracked against the record in hand, so a worker here takes batches
    /// of one (batch stages are called with one document).
    fn max_in_hand(&self) -> usize {
        1
    }

    fn commit_pending_doc_offsets(&mut self) -> Result<(), MessengerError> {
        // The document's events go out together, counted against its record.
        let tag = self.current.map_or(Tag::Untracked, Tag::Record);
        self.events.send(&self.topics, &self.producer, tag)?;
        if let Some(origin) = self.current.take() {
            self.shared.lock().processed(origin);
        }
        if let Some(partition) = self.probation.take() {
            self.end_probation(partition);
        }
        if let Some(hand) = self.hand.take() {
            self.shared.solo.put_down(hand);
        }
        self.commit()
    }
}

impl Drop for KafkaWorkerMessenger {
    fn drop(&mut self) {
        // A record given up in hand must not hold the other threads off.
        if let Some(hand) = self.hand.take() {
            self.shared.solo.put_down(hand);
        }
        // Finish what was sent, commit what is complete, leave the group. A
        // Hybrid pair's indexer sees its queue close, and indexes what is on it.
        if let Output::Hybrid { queue, .. } = &mut self.output {
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
