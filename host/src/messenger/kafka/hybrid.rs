//! Hybrid mode: Kafka in, memory out. A process runs worker–indexer pairs;
//! each pair's worker consumes the source topic (as in Kafka mode) and hands
//! its documents to its own indexer on an in-memory FIFO queue, skipping the
//! Kafka hop between them. Events and dead letters still go to Kafka.
//!
//! A source record's offset is committed (by the worker, whose consumer it
//! is) only when every document it produced is indexed or dead-lettered and
//! every message about it (events, dead letters) is acknowledged: the record
//! is *held* while its documents are on the queue or in a batch, and a batch
//! releases its records once its own messages are acknowledged. One
//! partition feeds one pair and one queue feeds one indexer, so per-id order
//! holds. On revocation the worker waits (bounded) for the pair to finish the
//! revoked partitions' documents, commits what is complete, and the indexer
//! leaves anything still queued from them to their new owner.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use rdkafka::producer::ThreadedProducer;

use super::KafkaTopics;
use super::delivery::{Deliveries, Origin, Shared, Tag};
use super::output::Queued;
use super::revocations::Revocations;
use super::wire::{EventBuffer, Lineages, dead_letter};
use crate::core::document::Document;
use crate::core::event::Event;
use crate::messenger::{Failure, IndexerMessenger, MessengerError, Polled};

/// The indexer end of a Hybrid pair: memory in, events and dead letters out.
pub struct HybridIndexerMessenger {
    /// The pair's consumer, of the process's.
    member: usize,
    topics: KafkaTopics,
    source: String,
    queue: Receiver<Queued>,
    producer: Arc<ThreadedProducer<Deliveries>>,
    shared: Arc<Shared>,
    revocations: Arc<Mutex<Revocations>>,
    /// The batch being built: its messages are accounted against it.
    batch: u64,
    /// Per document returned since the last batch: its id, source record and
    /// the pair's revocations when it was polled.
    polled: Vec<(String, Origin, u64)>,
    events: EventBuffer,
    lineages: Lineages,
    /// Done batches whose records may still be held (messages in flight).
    done: Vec<u64>,
}

impl std::fmt::Debug for HybridIndexerMessenger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridIndexerMessenger")
            .field("source", &self.source)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl HybridIndexerMessenger {
    /// The indexer end of pair `member`, whose worker (made by
    /// [`KafkaWorkerMessenger::hybrid_pairs`](super::KafkaWorkerMessenger::hybrid_pairs))
    /// sends on the other end of `queue`.
    pub(super) fn new(
        member: usize,
        topics: &KafkaTopics,
        queue: Receiver<Queued>,
        producer: &Arc<ThreadedProducer<Deliveries>>,
        shared: &Arc<Shared>,
        revocations: Arc<Mutex<Revocations>>,
    ) -> Self {
        Self {
            member,
            topics: topics.clone(),
            source: topics.source(),
            queue,
            producer: Arc::clone(producer),
            shared: Arc::clone(shared),
            revocations,
            batch: shared.next_batch(),
            polled: Vec::new(),
            events: EventBuffer::default(),
            lineages: Lineages::default(),
            done: Vec::new(),
        }
    }

    fn fail_on_delivery_failure(&self) -> Result<(), MessengerError> {
        match &self.shared.lock().failure {
            Some(failure) => Err(super::transport(failure)),
            None => Ok(()),
        }
    }
}

impl IndexerMessenger for HybridIndexerMessenger {
    fn poll_doc_to_index(&mut self, timeout: Duration) -> Result<Polled<Document>, MessengerError> {
        self.fail_on_delivery_failure()?;
        loop {
            let queued = match self.queue.recv_timeout(timeout) {
                Ok(queued) => queued,
                Err(RecvTimeoutError::Timeout) => return Ok(Polled::Idle),
                Err(RecvTimeoutError::Disconnected) => return Ok(Polled::Closed),
            };
            let revoked = self
                .revocations
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .revoked_since(queued.origin.partition, queued.generation);
            if revoked {
                // Its partition moved on (uncommitted): the new owner has it.
                continue;
            }
            let Queued {
                doc,
                origin,
                generation,
                lineage,
            } = queued;
            self.lineages.polled(doc.id(), lineage);
            self.polled.push((doc.id().to_owned(), origin, generation));
            return Ok(Polled::Item(doc));
        }
    }

    fn send_event(&mut self, mut event: Event) -> Result<(), MessengerError> {
        self.lineages.stamp(&mut event);
        self.events.push(&self.topics, event);
        Ok(())
    }

    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError> {
        let source = self
            .polled
            .iter()
            .find(|(id, ..)| id == doc.id())
            .map(|&(_, origin, _)| (self.source.as_str(), origin.partition, origin.offset));
        let tag = Tag::Batch(self.batch);
        dead_letter(&self.producer, &self.topics, &doc, failure, source, tag)
    }

    fn drop_revoked(&mut self, batch: &mut Vec<Document>) {
        let polled = self
            .polled
            .iter()
            .map(|&(_, o, generation)| (o.partition, generation));
        self.revocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drop_revoked(batch, polled);
    }

    fn batch_complete(&mut self, _batch: &[Document]) -> Result<(), MessengerError> {
        self.lineages.clear();
        self.events
            .send(&self.topics, &self.producer, Tag::Batch(self.batch))?;
        // The batch's records are released when its messages are acknowledged;
        // the worker then commits them.
        let origins = self.polled.drain(..).map(|(_, origin, _)| origin).collect();
        let mut tracker = self.shared.lock();
        tracker.batch_done(self.batch, origins);
        self.done.retain(|b| tracker.holding.contains_key(b));
        self.done.push(self.batch);
        drop(tracker);
        self.shared.changed.notify_all();
        self.batch = self.shared.next_batch();
        self.fail_on_delivery_failure()
    }
}

impl Drop for HybridIndexerMessenger {
    fn drop(&mut self) {
        // Let the last batches' messages be acknowledged, so that the worker's
        // final commit covers them.
        if !self
            .shared
            .wait_released(&self.done, Duration::from_secs(10))
        {
            tracing::warn!(
                "the last batch's events are unacknowledged; its documents will be redelivered"
            );
        }
        // Whatever this indexer still holds is never released (so never
        // committed); its worker need not wait for it.
        self.shared.lock().orphaned.push(self.member);
        self.shared.changed.notify_all();
    }
}
