//! Delivery tracking: the one internal API the worker, indexer and Hybrid
//! roles share. Every message a process produces is accounted against what
//! waits for it (a source record, an indexer batch), and offsets move only
//! over what is complete.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use foldhash::HashMap;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};

use super::client::cluster_up;
use super::{KafkaTopics, transport};
use crate::messenger::MessengerError;

/// What one source record still waits for.
#[derive(Debug, Default)]
pub(super) struct RecordState {
    pub(super) outstanding: u32,
    pub(super) processed: bool,
}

/// Per partition: records not yet complete, and the highest completed offset.
#[derive(Debug, Default)]
pub(super) struct PartitionTrack {
    pub(super) pending: BTreeMap<i64, RecordState>,
    pub(super) highest_done: Option<i64>,
    /// Which ownership of the partition this is: a partition revoked and
    /// assigned again gets a new track, and late news about the records of
    /// an old one (acknowledgements, indexed batches) must not touch it.
    pub(super) epoch: u64,
}

impl PartitionTrack {
    /// The next offset to commit: everything below it is complete.
    pub(super) fn committable(&self) -> Option<i64> {
        match self.pending.first_key_value() {
            Some((&first, _)) => Some(first),
            None => self.highest_done.map(|o| o + 1),
        }
    }

    pub(super) fn finish_if_complete(&mut self, offset: i64) {
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
pub(super) struct Tracker {
    /// Per consumer of the process and partition it owns.
    pub(super) partitions: HashMap<(usize, i32), PartitionTrack>,
    /// Per indexer batch, its messages not yet acknowledged.
    pub(super) batches: HashMap<u64, u32>,
    /// Per done Hybrid indexer batch still waiting for its messages: the
    /// source records it holds, released when they are acknowledged.
    pub(super) holding: HashMap<u64, Vec<Origin>>,
    /// Consumers whose Hybrid indexer is gone: what they hold stays pending.
    pub(super) orphaned: Vec<usize>,
    /// Tracks made so far (each gets the next number as its epoch).
    pub(super) epochs: u64,
    pub(super) failure: Option<String>,
    /// Messages produced and not yet acknowledged (or refused).
    pub(super) in_flight: u64,
    /// A runner's journal entries not yet acknowledged, by number, with
    /// their payloads; and those refused, to send again (a journal entry
    /// lost would make a resumed run miscount).
    pub(super) journal: BTreeMap<u64, Vec<u8>>,
    pub(super) journal_again: BTreeMap<u64, Vec<u8>>,
}

impl Tracker {
    /// A message for `tag` was handed to the producer.
    pub(super) fn sent(&mut self, tag: Tag) {
        self.in_flight += 1;
        match tag {
            Tag::Record(origin) => self.hold(origin),
            Tag::Batch(batch) => *self.batches.entry(batch).or_default() += 1,
            Tag::Untracked | Tag::Published | Tag::Journal(_) => {}
        }
    }

    /// A message for `tag` was acknowledged or refused.
    pub(super) fn settled(&mut self, tag: Tag) {
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
            Tag::Untracked | Tag::Published | Tag::Journal(_) => {}
        }
    }

    /// Journal entry `number` was refused: it goes again.
    pub(super) fn journal_refused(&mut self, number: u64) {
        if let Some(payload) = self.journal.remove(&number) {
            self.journal_again.insert(number, payload);
        }
    }

    /// A record consumer `member` polled: pending until processed and
    /// everything it caused is done.
    pub(super) fn polled(&mut self, member: usize, partition: i32, offset: i64) -> Origin {
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
    pub(super) fn track_of(&mut self, origin: Origin) -> Option<&mut PartitionTrack> {
        self.partitions
            .get_mut(&origin.track())
            .filter(|t| t.epoch == origin.epoch)
    }

    /// Something `origin` waits for besides messages (its document on a
    /// Hybrid pair's queue) is now pending.
    pub(super) fn hold(&mut self, origin: Origin) {
        if let Some(state) = self
            .track_of(origin)
            .and_then(|t| t.pending.get_mut(&origin.offset))
        {
            state.outstanding += 1;
        }
    }

    /// One thing `origin` waited for is done.
    pub(super) fn release(&mut self, origin: Origin) {
        if let Some(track) = self.track_of(origin)
            && let Some(state) = track.pending.get_mut(&origin.offset)
        {
            state.outstanding = state.outstanding.saturating_sub(1);
            track.finish_if_complete(origin.offset);
        }
    }

    /// The worker is done with `origin` (its outputs are on their way).
    pub(super) fn processed(&mut self, origin: Origin) {
        if let Some(track) = self.track_of(origin) {
            if let Some(state) = track.pending.get_mut(&origin.offset) {
                state.processed = true;
            }
            track.finish_if_complete(origin.offset);
        }
    }

    /// A Hybrid indexer finished `batch`, whose documents came from
    /// `origins`: release them once the batch's messages are acknowledged.
    pub(super) fn batch_done(&mut self, batch: u64, origins: Vec<Origin>) {
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
pub(super) struct Shared {
    pub(super) tracker: Mutex<Tracker>,
    pub(super) changed: Condvar,
    /// Numbers indexer batches, unique in the process.
    pub(super) batch_numbers: std::sync::atomic::AtomicU64,
    /// Which worker threads have a record in hand (suspects go alone).
    pub(super) solo: super::solo::Solo,
    /// The ids of the runner's documents acknowledged on the source topic
    /// ([`Tag::Published`]) and not yet in the run's journal.
    pub(super) published: Mutex<Vec<String>>,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Tracker> {
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn next_batch(&self) -> u64 {
        self.batch_numbers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Wait until `done` tells the outcome (it sees the tracker after each
    /// change); false when `timeout` passes first.
    fn wait_until(&self, timeout: Duration, done: impl Fn(&Tracker) -> Option<bool>) -> bool {
        let deadline = crate::core::time::deadline_after(timeout);
        let mut tracker = self.lock();
        loop {
            if let Some(outcome) = done(&tracker) {
                return outcome;
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

    /// Wait until every message produced so far is acknowledged; false on
    /// timeout or after a delivery failure.
    pub(super) fn wait_all_delivered(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, |t| {
            if t.failure.is_some() {
                Some(false)
            } else {
                (t.in_flight == 0).then_some(true)
            }
        })
    }

    /// Wait until every journal entry produced so far is acknowledged;
    /// false on timeout or when one was refused (it waits to go again).
    pub(super) fn wait_journal_settled(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, |t| {
            if !t.journal_again.is_empty() {
                Some(false)
            } else {
                t.journal.is_empty().then_some(true)
            }
        })
    }

    /// Wait until none of `batches` holds records any more (their messages
    /// are acknowledged); false on timeout or after a delivery failure.
    pub(super) fn wait_released(&self, batches: &[u64], timeout: Duration) -> bool {
        self.wait_until(timeout, |t| {
            if t.failure.is_some() {
                Some(false)
            } else {
                batches
                    .iter()
                    .all(|b| !t.holding.contains_key(b))
                    .then_some(true)
            }
        })
    }

    /// Wait until no message caused by records of consumer `member` (of
    /// its `partitions`, or of all) is in flight.
    pub(super) fn wait_delivered(
        &self,
        member: usize,
        partitions: Option<&[i32]>,
        timeout: Duration,
    ) -> bool {
        self.wait_until(timeout, |t| {
            let busy = t.partitions.iter().any(|(&(m, p), track)| {
                m == member
                    && partitions.is_none_or(|ps| ps.contains(&p))
                    && track.pending.values().any(|r| r.outstanding > 0)
            });
            (!busy || t.failure.is_some() || t.orphaned.contains(&member)).then_some(!busy)
        })
    }
}

/// A source record, read by consumer `member` of the process while it
/// owned the partition for the `epoch`th time.
#[derive(Debug, Clone, Copy)]
pub(super) struct Origin {
    pub(super) member: usize,
    pub(super) partition: i32,
    pub(super) offset: i64,
    pub(super) epoch: u64,
}

impl Origin {
    pub(super) fn track(self) -> (usize, i32) {
        (self.member, self.partition)
    }
}

/// What a produced message is accounted against.
#[derive(Debug, Clone, Copy)]
pub(super) enum Tag {
    /// A worker's source record: its offset waits for the message.
    Record(Origin),
    /// An indexer's batch: its offsets wait for the message.
    Batch(u64),
    /// Nothing (a worker's message with no record).
    Untracked,
    /// A runner's document: once acknowledged its id goes to the run's
    /// journal ([`Shared::published`]).
    Published,
    /// A runner's journal entry, by number ([`Tracker::journal`]): refused,
    /// it is sent again, and the run goes on.
    Journal(u64),
}

/// Producer callbacks: record acknowledgements against what waits for them.
pub(super) struct Deliveries(pub(super) Arc<Shared>);

super::client::quiet_client_context!(Deliveries);

/// What a produced message carries back to its delivery callback.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sent {
    tag: Tag,
    /// Events, which go to a run's event topic: when that topic is gone
    /// (the run ended; a redelivered document's events come late), nobody
    /// reads them, and their loss is no failure.
    events: bool,
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<Sent>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Self::DeliveryOpaque) {
        if result.is_ok() {
            cluster_up();
        }
        if let (Ok(message), Tag::Published) = (result, sent.tag)
            && let Some(key) = message.key()
        {
            self.0
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(String::from_utf8_lossy(key).into_owned());
        }
        let mut tracker = self.0.lock();
        if let Tag::Journal(number) = sent.tag {
            match result {
                Ok(_) => {
                    tracker.journal.remove(&number);
                }
                Err((e, message)) => {
                    tracing::warn!(topic = message.topic(), error = %e,
                        "a journal entry was not delivered; it is sent again");
                    tracker.journal_refused(number);
                }
            }
        } else if let Err((e, message)) = result {
            if sent.events && e.rdkafka_error_code().is_some_and(topic_gone) {
                tracing::info!(
                    topic = message.topic(),
                    "events for a run that has ended (its event topic is gone) were dropped"
                );
            } else {
                let failure = format!("delivery to {} failed: {e}", message.topic());
                tracing::error!("{failure}");
                tracker.failure.get_or_insert(failure);
            }
        }
        tracker.settled(sent.tag);
        drop(tracker);
        self.0.changed.notify_all();
    }
}

/// Whether `code` says a topic (or the partition produced to) does not
/// exist: for a run's event topic, that the run ended and it was deleted.
/// librdkafka says so in three ways, by where it learns it.
fn topic_gone(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownPartition
    )
}

/// A producer whose deliveries are accounted in `shared`.
pub(super) fn shared_producer(
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
pub(super) fn produce(
    producer: &ThreadedProducer<Deliveries>,
    topic: &str,
    key: &str,
    payload: &[u8],
    headers: Option<OwnedHeaders>,
    tag: Tag,
) -> Result<(), MessengerError> {
    let sent = Sent { tag, events: false };
    produce_sent(producer, topic, key, payload, headers, sent)
}

/// [`produce`] a message of events.
pub(super) fn produce_events(
    producer: &ThreadedProducer<Deliveries>,
    topic: &str,
    key: &str,
    payload: &[u8],
    tag: Tag,
) -> Result<(), MessengerError> {
    let sent = Sent { tag, events: true };
    produce_sent(producer, topic, key, payload, None, sent)
}

fn produce_sent(
    producer: &ThreadedProducer<Deliveries>,
    topic: &str,
    key: &str,
    payload: &[u8],
    headers: Option<OwnedHeaders>,
    sent: Sent,
) -> Result<(), MessengerError> {
    let (tag, sent_events) = (sent.tag, sent.events);
    let mut record = BaseRecord::with_opaque_to(topic, Box::new(sent))
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
                if sent_events && e.rdkafka_error_code().is_some_and(topic_gone) {
                    // librdkafka knows the topic lost its partitions: the
                    // run ended and its event topic was deleted.
                    tracing::info!(
                        topic,
                        "events for a run that has ended (its event topic is gone) were dropped"
                    );
                    return Ok(());
                }
                return Err(transport(format!("cannot produce to {topic}: {e}")));
            }
        }
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
    fn a_refused_journal_entry_waits_to_go_again() {
        let mut tracker = Tracker::default();
        for number in [4, 5] {
            tracker.sent(Tag::Journal(number));
            tracker.journal.insert(number, vec![b'0' + number as u8]);
        }
        tracker.journal_refused(4);
        tracker.settled(Tag::Journal(4));
        assert_eq!(
            tracker.journal_again.keys().copied().collect::<Vec<_>>(),
            [4]
        );
        assert!(tracker.failure.is_none(), "the run goes on");
        tracker.journal.remove(&5);
        tracker.settled(Tag::Journal(5));
        assert_eq!(tracker.in_flight, 0);
        // Refused again once gone: nothing to send.
        tracker.journal_refused(5);
        assert_eq!(tracker.journal_again.len(), 1);
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
}
