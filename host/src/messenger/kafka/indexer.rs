//! The indexer role: consumes the destination topic in the indexers' group.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use foldhash::HashMap;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::ThreadedProducer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client::{commit_failed, polled};
use super::delivery::{Deliveries, Shared, Tag, Tracker, produce, shared_producer};
use super::fence::Fence;
use super::revocations::Revocations;
use super::wire::{
    EventBuffer, Lineage, Lineages, dead_letter, document_from, lineage_of, log_assignment,
    origin_of, undecodable, undecodable_event,
};
use super::{COMMIT_INTERVAL, KafkaTopics, transport};
use crate::core::document::Document;
use crate::core::event::{Event, EventKind};
use crate::messenger::{Failure, IndexerMessenger, MessengerError, Polled};

/// What an indexer may commit: the offsets it has polled, and the batches
/// that are done but whose messages (events, dead letters) are not all
/// acknowledged yet. A batch's offsets are committed once its messages and
/// those of every earlier batch are on the broker; the indexer never waits
/// for that, it goes on with the next batch.
#[derive(Debug, Default)]
pub(super) struct IndexerProgress {
    /// Next offset per partition after everything polled so far.
    pub(super) polled: HashMap<i32, i64>,
    /// Done batches, oldest first, with the offsets they complete.
    pub(super) unacked: std::collections::VecDeque<(u64, HashMap<i32, i64>)>,
}

impl IndexerProgress {
    /// Take the oldest batches whose messages are all acknowledged; the
    /// offsets they complete. Nothing after a delivery failure.
    pub(super) fn take_acked(&mut self, tracker: &Tracker) -> HashMap<i32, i64> {
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
    pub(super) fn forget(&mut self, partitions: &[i32]) {
        self.polled.retain(|p, _| !partitions.contains(p));
        for (_, offsets) in &mut self.unacked {
            offsets.retain(|p, _| !partitions.contains(p));
        }
    }
}

pub(super) fn offsets_list(topic: &str, offsets: &HashMap<i32, i64>) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (&partition, &next) in offsets {
        let _ = tpl.add_partition_offset(topic, partition, Offset::Offset(next));
    }
    tpl
}

/// An indexer's messenger: consumes the destination topic; commits a batch's
/// offsets only once the batch is done and its events are delivered.
pub struct KafkaIndexerMessenger {
    pub(super) topics: KafkaTopics,
    pub(super) dest: String,
    pub(super) consumer: BaseConsumer<IndexerRebalance>,
    pub(super) producer: ThreadedProducer<Deliveries>,
    pub(super) shared: Arc<Shared>,
    pub(super) progress: Arc<Mutex<IndexerProgress>>,
    /// The batch being built: its messages are accounted against it.
    pub(super) batch: u64,
    /// The partition of each document returned since the last batch, and how
    /// many revocations had happened when it was polled.
    pub(super) batch_partitions: Vec<(i32, u64)>,
    /// Revocations so far, and per partition the count at its latest one.
    pub(super) revoked: Arc<Mutex<Revocations>>,
    pub(super) events: EventBuffer,
    pub(super) lineages: Lineages,
    pub(super) current: Option<(i32, i64)>,
    pub(super) last_commit: Instant,
    /// Turns away late copies of older versions (see [`super::fence`]).
    pub(super) fence: Fence,
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
pub(super) struct IndexerRebalance {
    pub(super) dest: String,
    pub(super) shared: Arc<Shared>,
    pub(super) progress: Arc<Mutex<IndexerProgress>>,
    pub(super) revoked: Arc<Mutex<Revocations>>,
}

super::client::quiet_client_context!(IndexerRebalance);

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
            lineages: Lineages::default(),
            current: None,
            last_commit: Instant::now(),
            fence: Fence::default(),
        })
    }

    /// `doc` is a late copy of an older version of its id (a newer one is
    /// indexed already): it is not indexed, its run hears it finished, and
    /// its offset is committed with the batch being built (or now, when
    /// none is).
    fn turn_away(
        &mut self,
        doc: &Document,
        lineage: Option<Lineage>,
    ) -> Result<(), MessengerError> {
        tracing::info!(
            doc_id = doc.id(),
            "a late copy of an older version was not indexed: a newer version of its id is indexed already"
        );
        let mut event = Event::new(doc, EventKind::Finish);
        if let Some(lineage) = lineage {
            event.attempt = Some(lineage.attempt);
            event.after_creates = lineage.after_creates;
        }
        self.events.push(&self.topics, event);
        let tag = Tag::Batch(self.batch);
        self.events.send(&self.topics, &self.producer, tag)?;
        if self.batch_partitions.is_empty() {
            let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            let polled = progress.polled.clone();
            progress.unacked.push_back((self.batch, polled));
            drop(progress);
            self.batch = self.shared.next_batch();
        }
        Ok(())
    }

    /// Commit the offsets of the batches now fully acknowledged, when busy at
    /// most every [`COMMIT_INTERVAL`]; an error once a delivery failed
    /// (nothing moves after that).
    pub(super) fn commit_acked(
        &mut self,
        mode: CommitMode,
        busy: bool,
    ) -> Result<(), MessengerError> {
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
        // A lost or refused commit is covered by the next one, or redelivers.
        if let Err(e) = self.consumer.commit(&offsets_list(&self.dest, &done), mode) {
            commit_failed(&e);
        }
        Ok(())
    }
}

impl IndexerMessenger for KafkaIndexerMessenger {
    fn poll_doc_to_index(&mut self, timeout: Duration) -> Result<Polled<Document>, MessengerError> {
        loop {
            let Some(message) = self.consumer.poll(timeout) else {
                self.commit_acked(CommitMode::Async, false)?;
                return Ok(Polled::Idle);
            };
            let Some(message) = polled(message)? else {
                return Ok(Polled::Idle);
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
                    if !self
                        .fence
                        .admit(doc.id(), doc.run_id(), origin_of(&message))
                    {
                        self.turn_away(&doc, lineage_of(&message))?;
                        continue;
                    }
                    let generation = self
                        .revoked
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .count;
                    self.batch_partitions.push((partition, generation));
                    self.lineages.polled(doc.id(), lineage_of(&message));
                    return Ok(Polled::Item(doc));
                }
                Err(e) => {
                    tracing::warn!(partition, offset, error = %e, "a message is not a Weir document; dead-lettered");
                    if let Some(event) = undecodable_event(&message, &e) {
                        self.events.push(&self.topics, event);
                    }
                    let (key, payload, headers) = undecodable(&message, &e, &self.dest);
                    let fail = self.topics.fail();
                    let tag = Tag::Batch(self.batch);
                    produce(&self.producer, &fail, &key, &payload, Some(headers), tag)?;
                    // Now, not with a batch: there may be no batch for a while.
                    self.events.send(&self.topics, &self.producer, tag)?;
                }
            }
        }
    }

    fn send_event(&mut self, mut event: Event) -> Result<(), MessengerError> {
        self.lineages.stamp(&mut event);
        self.events.push(&self.topics, event);
        Ok(())
    }

    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError> {
        let source = self.current.map(|(p, o)| (self.dest.as_str(), p, o));
        let tag = Tag::Batch(self.batch);
        dead_letter(&self.producer, &self.topics, &doc, failure, source, tag)
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
        self.lineages.clear();
        self.events
            .send(&self.topics, &self.producer, Tag::Batch(self.batch))?;
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
