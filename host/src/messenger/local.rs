//! The in-process messenger: bounded queues between publisher, workers and
//! indexer. A full queue blocks its sender, so a fast connector never runs
//! ahead of its workers by more than the queue's capacity.
//!
//! Each worker has a source queue of its own, and a document goes to the
//! worker its id hashes to (as a record goes to its key's partition in Kafka
//! mode): the versions of one id are processed and indexed in the order
//! they were published, whatever the number of workers.
//!
//! A queue is bounded twice: by documents and by their bytes (as
//! [`Document::approx_json_bytes`] measures them), so a connector that
//! publishes the largest documents it may cannot fill the host's memory
//! with a queue's worth of them. A document larger than the byte bound
//! still passes, alone.
//!
//! Indexers hand the documents they are done with back to the publisher,
//! to be freed on the connector's thread that built them (`spent`).
//!
//! Shutdown is by closing: when the publisher side is dropped, workers drain
//! the source queue and see [`Polled::Closed`]; when every worker is gone, the
//! indexer drains the destination queue and sees it too.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender, bounded, unbounded};

use super::{
    Failure, IndexerMessenger, MessengerError, Polled, PublisherMessenger, WorkerMessenger,
};
use crate::core::document::Document;
use crate::core::event::Event;

mod drain;
mod spent;

use drain::{Drain, Waiting};

/// How long a blocked worker waits before checking that the indexer is
/// still there.
const SEND_WAIT: Duration = Duration::from_millis(50);
/// How long a worker or indexer gathering a batch lets documents build up
/// when its queue is empty (see `gathered`): at the pace of a fast
/// connector, hundreds of documents, for one switch of threads instead of
/// one each.
const LINGER: Duration = Duration::from_millis(1);

/// The bytes of the documents in one queue, bounded.
#[derive(Debug)]
struct QueueBytes {
    max: usize,
    /// Bytes queued, and whether the receiving side is gone.
    state: Mutex<(usize, bool)>,
    freed: Condvar,
    /// Senders waiting on `freed`: with none, a release wakes nobody (a
    /// notify is a system call even when nobody waits).
    waiters: std::sync::atomic::AtomicUsize,
}

/// Whether a document may be queued.
#[derive(Debug, PartialEq, Eq)]
enum Room {
    Granted,
    Full,
    Closed,
}

impl QueueBytes {
    fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            state: Mutex::new((0, false)),
            freed: Condvar::new(),
            waiters: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Room for `bytes`, waiting up to `timeout`: granted when they fit, or
    /// when the queue is empty (a large document goes alone).
    fn reserve(&self, bytes: usize, timeout: Duration) -> Room {
        // The clock is read only when there is a wait.
        let mut deadline = None;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let (held, closed) = *state;
            if closed {
                return Room::Closed;
            }
            if held == 0 || held.saturating_add(bytes) <= self.max {
                state.0 = held.saturating_add(bytes);
                return Room::Granted;
            }
            let deadline =
                *deadline.get_or_insert_with(|| crate::core::time::deadline_after(timeout));
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Room::Full;
            }
            self.waiters.fetch_add(1, Ordering::SeqCst);
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// `bytes` left the queue (or never entered it).
    fn release(&self, bytes: usize) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = state.0.saturating_sub(bytes);
        // A waiter registers under the lock held here, so none is missed.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.freed.notify_all();
        }
    }

    /// The receiving side is gone: nobody will free anything.
    fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.freed.notify_all();
    }
}

/// Closes a queue's byte bound when its receiver is gone, so that a sender
/// waiting for room learns that nobody will make any.
#[derive(Debug)]
struct SourceReceiver(Arc<QueueBytes>);

impl Drop for SourceReceiver {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Builds the ends of a local pipeline.
#[derive(Debug)]
pub struct LocalMessenger {
    capacity: usize,
    max_bytes: usize,
    events: (Sender<Event>, Receiver<Event>),
}

impl LocalMessenger {
    /// Queues holding at most `capacity` documents and `max_bytes` of them:
    /// the source (shared out among the workers' queues) and the
    /// destination (shared out among the indexers'). Events are not
    /// bounded: a worker must never block on reporting, or a full event
    /// queue could stall the publisher that drains it.
    pub fn new(capacity: usize, max_bytes: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            max_bytes,
            events: unbounded(),
        }
    }

    /// Hand out the ends: a publisher, `workers` workers each with a source
    /// queue of its own, and `indexers` indexers each with a destination
    /// queue of its own. A document goes to the worker, and then the
    /// indexer, its id hashes to, as a Kafka record goes to its key's
    /// partition, so the versions of one id are processed, and indexed, in
    /// the order they were published. The queues close when the ends are
    /// dropped.
    pub fn into_parts(self, workers: usize, indexers: usize) -> LocalParts {
        let (sources, receivers) = self.queues(workers);
        let (dests, dest_receivers) = self.queues(indexers);
        let route = foldhash::fast::FixedState::with_seed(0);
        let dests: Arc<[Queue]> = dests.into();
        let (spent, returns) = spent::way_back();
        let drain = Drain::new(workers.min(receivers.len()));
        let workers = receivers
            .into_iter()
            .take(workers)
            .map(|(source, source_bytes)| LocalWorkerMessenger {
                source,
                _receiver: SourceReceiver(Arc::clone(&source_bytes)),
                source_bytes,
                dests: Arc::clone(&dests),
                route: route.clone(),
                events: self.events.0.clone(),
                waiting: Waiting::new(Arc::clone(&drain)),
            })
            .collect();
        let indexers = dest_receivers
            .into_iter()
            .take(indexers)
            .map(|(dest, dest_bytes)| LocalIndexerMessenger {
                dest,
                dest_bytes,
                events: self.events.0.clone(),
                spent: spent.clone(),
                drain: Arc::clone(&drain),
            })
            .collect();
        LocalParts {
            publisher: LocalPublisherMessenger {
                sources: sources.into(),
                route,
                events: self.events.1.clone(),
                returns,
                drain,
            },
            workers,
            indexers,
        }
    }

    /// `n` queues (at least one) sharing this messenger's bounds.
    fn queues(&self, n: usize) -> (Vec<Queue>, Vec<QueueEnd>) {
        let n = n.max(1);
        let capacity = self.capacity.div_ceil(n);
        let max_bytes = (self.max_bytes / n).max(1);
        (0..n)
            .map(|_| {
                let (tx, rx) = bounded(capacity);
                let bytes = QueueBytes::new(max_bytes);
                (
                    Queue {
                        tx,
                        bytes: Arc::clone(&bytes),
                    },
                    (rx, bytes),
                )
            })
            .unzip()
    }
}

/// A queue, as its receiver sees it.
type QueueEnd = (Receiver<Document>, Arc<QueueBytes>);

/// A queue, as its senders see it.
#[derive(Debug)]
struct Queue {
    tx: Sender<Document>,
    bytes: Arc<QueueBytes>,
}

/// The queue of `queues` that `id` goes to: the same one for the whole run.
fn route<'a>(queues: &'a [Queue], hasher: &foldhash::fast::FixedState, id: &str) -> &'a Queue {
    use std::hash::BuildHasher;
    &queues[(hasher.hash_one(id) % queues.len() as u64) as usize]
}

/// The ends of one local pipeline.
#[derive(Debug)]
pub struct LocalParts {
    pub publisher: LocalPublisherMessenger,
    pub workers: Vec<LocalWorkerMessenger>,
    pub indexers: Vec<LocalIndexerMessenger>,
}

/// A document off a queue, its bytes given back.
fn received(polled: Polled<Document>, bytes: &QueueBytes) -> Polled<Document> {
    if let Polled::Item(doc) = &polled {
        bytes.release(doc.approx_json_bytes());
    }
    polled
}

/// The next item of `rx` for a batch being gathered, within `slice`: when
/// nothing is queued, after letting items build up for [`LINGER`] (woken
/// by each item instead, a worker or indexer gathering at the pace the
/// connector publishes would switch threads once per document). When the
/// linger brought nothing, the source is slow: the rest of the slice waits
/// for the next item as [`poll`] does, so a trickle does not make it look
/// a thousand times a second.
fn gathered<T>(rx: &Receiver<T>, slice: Duration) -> Polled<T> {
    match rx.try_recv() {
        Ok(item) => Polled::Item(item),
        Err(crossbeam_channel::TryRecvError::Disconnected) => Polled::Closed,
        Err(crossbeam_channel::TryRecvError::Empty) if slice.is_zero() => Polled::Idle,
        Err(crossbeam_channel::TryRecvError::Empty) => {
            let linger = slice.min(LINGER);
            std::thread::sleep(linger);
            poll(rx, slice - linger)
        }
    }
}

fn poll<T>(rx: &Receiver<T>, timeout: Duration) -> Polled<T> {
    // What is there already is taken without computing a deadline (a clock read).
    match rx.try_recv() {
        Ok(item) => return Polled::Item(item),
        Err(crossbeam_channel::TryRecvError::Disconnected) => return Polled::Closed,
        Err(crossbeam_channel::TryRecvError::Empty) if timeout.is_zero() => return Polled::Idle,
        Err(crossbeam_channel::TryRecvError::Empty) => {}
    }
    match rx.recv_timeout(timeout) {
        Ok(item) => Polled::Item(item),
        Err(RecvTimeoutError::Timeout) => Polled::Idle,
        Err(RecvTimeoutError::Disconnected) => Polled::Closed,
    }
}

#[derive(Debug, Clone)]
pub struct LocalPublisherMessenger {
    sources: Arc<[Queue]>,
    /// Which worker an id goes to: the same one for the whole run.
    route: foldhash::fast::FixedState,
    events: Receiver<Event>,
    returns: spent::Returns,
    drain: Arc<Drain>,
}

impl PublisherMessenger for LocalPublisherMessenger {
    fn send_for_processing(
        &self,
        doc: Document,
        timeout: Duration,
    ) -> Result<Option<Document>, MessengerError> {
        self.returns.free();
        let source = route(&self.sources, &self.route, doc.id());
        let bytes = doc.approx_json_bytes();
        match source.bytes.reserve(bytes, timeout) {
            Room::Granted => {}
            Room::Full => return Ok(Some(doc)),
            Room::Closed => return Err(MessengerError::Closed("processing")),
        }
        let doc = match source.tx.try_send(doc) {
            Ok(()) => return Ok(None),
            Err(crossbeam_channel::TrySendError::Full(doc)) => doc,
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                return Err(MessengerError::Closed("processing"));
            }
        };
        match source.tx.send_timeout(doc, timeout) {
            Ok(()) => Ok(None),
            Err(SendTimeoutError::Timeout(doc)) => {
                source.bytes.release(bytes);
                Ok(Some(doc))
            }
            Err(SendTimeoutError::Disconnected(_)) => Err(MessengerError::Closed("processing")),
        }
    }

    fn poll_event(&self, timeout: Duration) -> Result<Polled<Event>, MessengerError> {
        Ok(poll(&self.events, timeout))
    }

    fn drain(&self) {
        self.drain.finish_source();
    }
}

#[derive(Debug)]
pub struct LocalWorkerMessenger {
    source: Receiver<Document>,
    source_bytes: Arc<QueueBytes>,
    _receiver: SourceReceiver,
    /// The indexers' queues, and which one an id goes to.
    dests: Arc<[Queue]>,
    route: foldhash::fast::FixedState,
    events: Sender<Event>,
    waiting: Waiting,
}

impl WorkerMessenger for LocalWorkerMessenger {
    fn poll_doc_to_process(
        &mut self,
        timeout: Duration,
    ) -> Result<Polled<Document>, MessengerError> {
        // A worker that waits on an empty queue holds nothing for the
        // indexers (a worker gathering the rest of a batch after the source
        // is done does not wait: see `draining`).
        let polled = match self.source.try_recv() {
            Ok(doc) => Polled::Item(doc),
            Err(crossbeam_channel::TryRecvError::Disconnected) => Polled::Closed,
            Err(crossbeam_channel::TryRecvError::Empty) if timeout.is_zero() => Polled::Idle,
            Err(crossbeam_channel::TryRecvError::Empty) => {
                self.waiting.idle();
                poll(&self.source, timeout)
            }
        };
        if let Polled::Item(_) = &polled {
            self.waiting.busy();
        }
        Ok(received(polled, &self.source_bytes))
    }

    fn draining(&self) -> bool {
        self.waiting.drain().source_done()
    }

    fn poll_gathering(&mut self, slice: Duration) -> Result<Polled<Document>, MessengerError> {
        Ok(received(gathered(&self.source, slice), &self.source_bytes))
    }

    fn send_for_indexing(&mut self, doc: Document) -> Result<(), MessengerError> {
        let closed = MessengerError::Closed("indexing");
        let bytes = doc.approx_json_bytes();
        let dest = route(&self.dests, &self.route, doc.id());
        loop {
            match dest.bytes.reserve(bytes, SEND_WAIT) {
                Room::Granted => break,
                Room::Full => {}
                Room::Closed => return Err(closed),
            }
        }
        dest.tx.send(doc).map_err(|_| closed)
    }

    fn send_failed(&mut self, _doc: Document, _failure: &Failure) -> Result<(), MessengerError> {
        // Local mode has no dead-letter store: the FAIL event and the log record it.
        Ok(())
    }

    fn send_event(&mut self, event: Event) -> Result<(), MessengerError> {
        self.events
            .send(event)
            .map_err(|_| MessengerError::Closed("event"))
    }

    fn commit_pending_doc_offsets(&mut self) -> Result<(), MessengerError> {
        Ok(())
    }
}

#[derive(Debug)]
pub struct LocalIndexerMessenger {
    dest: Receiver<Document>,
    dest_bytes: Arc<QueueBytes>,
    events: Sender<Event>,
    spent: spent::Spent,
    drain: Arc<Drain>,
}

/// Workers waiting for room in the destination queue must not wait for an
/// indexer that is gone.
impl Drop for LocalIndexerMessenger {
    fn drop(&mut self) {
        self.dest_bytes.close();
    }
}

impl IndexerMessenger for LocalIndexerMessenger {
    fn poll_doc_to_index(&mut self, timeout: Duration) -> Result<Polled<Document>, MessengerError> {
        Ok(received(poll(&self.dest, timeout), &self.dest_bytes))
    }

    fn poll_gathering(&mut self, slice: Duration) -> Result<Polled<Document>, MessengerError> {
        Ok(received(gathered(&self.dest, slice), &self.dest_bytes))
    }

    fn send_event(&mut self, event: Event) -> Result<(), MessengerError> {
        self.events
            .send(event)
            .map_err(|_| MessengerError::Closed("event"))
    }

    fn send_failed(&mut self, _doc: Document, _failure: &Failure) -> Result<(), MessengerError> {
        Ok(())
    }

    fn batch_complete(&mut self, _batch: &[Document]) -> Result<(), MessengerError> {
        Ok(())
    }

    fn retire(&mut self, batch: Vec<Document>) {
        self.spent.retire(batch);
    }

    fn draining(&self) -> bool {
        self.drain.source_done()
    }

    fn upstream_idle(&self) -> bool {
        self.drain.upstream_idle()
    }
}

#[cfg(test)]
mod tests;
