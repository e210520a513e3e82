//! A messenger for tests: local queues that also keep a copy of every document
//! sent for processing, sent for indexing and dead-lettered, and every event.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::core::document::Document;
use crate::core::event::Event;
use crate::messenger::local::LocalMessenger;
use crate::messenger::{
    Failure, IndexerMessenger, MessengerError, MessengerFactory, MessengerParts, Polled,
    PublisherMessenger, WorkerMessenger,
};

/// Everything that went through a recording messenger.
#[derive(Debug, Default)]
pub struct Recording {
    sent_for_processing: Mutex<Vec<Document>>,
    sent_for_indexing: Mutex<Vec<Document>>,
    failed: Mutex<Vec<(Document, Failure)>>,
    events: Mutex<Vec<Event>>,
}

fn push<T>(list: &Mutex<Vec<T>>, item: T) {
    list.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(item);
}

fn copy<T: Clone>(list: &Mutex<Vec<T>>) -> Vec<T> {
    list.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

impl Recording {
    /// Documents the connector published, in order.
    pub fn sent_for_processing(&self) -> Vec<Document> {
        copy(&self.sent_for_processing)
    }
    /// Documents the workers passed to the indexer.
    pub fn sent_for_indexing(&self) -> Vec<Document> {
        copy(&self.sent_for_indexing)
    }
    /// Documents dead-lettered, with why.
    pub fn failed(&self) -> Vec<(Document, Failure)> {
        copy(&self.failed)
    }
    /// Every event, in the order it was sent.
    pub fn events(&self) -> Vec<Event> {
        copy(&self.events)
    }
}

/// Local queues that record into one shared [`Recording`], for every
/// pipeline they are asked for.
#[derive(Debug, Clone)]
pub struct RecordingMessengers {
    capacity: usize,
    recording: Arc<Recording>,
}

impl RecordingMessengers {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            recording: Arc::default(),
        }
    }

    /// What was recorded so far.
    pub fn recording(&self) -> Arc<Recording> {
        Arc::clone(&self.recording)
    }
}

impl MessengerFactory for RecordingMessengers {
    fn create(
        &self,
        _pipeline: &str,
        workers: usize,
        indexers: usize,
        _run_id: &str,
    ) -> Result<MessengerParts, MessengerError> {
        let local = LocalMessenger::new(self.capacity, usize::MAX).into_parts(workers, indexers);
        Ok(MessengerParts {
            publisher: Box::new(Recorder {
                inner: local.publisher,
                recording: Arc::clone(&self.recording),
            }),
            workers: local
                .workers
                .into_iter()
                .map(|w| {
                    Box::new(Recorder {
                        inner: w,
                        recording: Arc::clone(&self.recording),
                    }) as Box<dyn WorkerMessenger>
                })
                .collect(),
            indexers: local
                .indexers
                .into_iter()
                .map(|i| {
                    Box::new(Recorder {
                        inner: i,
                        recording: Arc::clone(&self.recording),
                    }) as Box<dyn IndexerMessenger>
                })
                .collect(),
        })
    }
}

/// Wraps any messenger end and records what passes through it.
struct Recorder<M> {
    inner: M,
    recording: Arc<Recording>,
}

impl<M: PublisherMessenger> PublisherMessenger for Recorder<M> {
    fn send_for_processing(
        &self,
        doc: Document,
        timeout: Duration,
    ) -> Result<Option<Document>, MessengerError> {
        let copy = doc.clone();
        let refused = self.inner.send_for_processing(doc, timeout)?;
        if refused.is_none() {
            push(&self.recording.sent_for_processing, copy);
        }
        Ok(refused)
    }

    fn poll_event(&self, timeout: Duration) -> Result<Polled<Event>, MessengerError> {
        self.inner.poll_event(timeout)
    }

    fn drain(&self) {
        self.inner.drain();
    }
}

impl<M: WorkerMessenger> WorkerMessenger for Recorder<M> {
    fn poll_doc_to_process(
        &mut self,
        timeout: Duration,
    ) -> Result<Polled<Document>, MessengerError> {
        self.inner.poll_doc_to_process(timeout)
    }

    fn poll_gathering(&mut self, slice: Duration) -> Result<Polled<Document>, MessengerError> {
        self.inner.poll_gathering(slice)
    }

    fn send_for_indexing(&mut self, doc: Document) -> Result<(), MessengerError> {
        push(&self.recording.sent_for_indexing, doc.clone());
        self.inner.send_for_indexing(doc)
    }

    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError> {
        push(&self.recording.failed, (doc.clone(), failure.clone()));
        self.inner.send_failed(doc, failure)
    }

    fn send_event(&mut self, event: Event) -> Result<(), MessengerError> {
        push(&self.recording.events, event.clone());
        self.inner.send_event(event)
    }

    fn commit_pending_doc_offsets(&mut self) -> Result<(), MessengerError> {
        self.inner.commit_pending_doc_offsets()
    }

    fn max_in_hand(&self) -> usize {
        self.inner.max_in_hand()
    }

    fn draining(&self) -> bool {
        self.inner.draining()
    }
}

impl<M: IndexerMessenger> IndexerMessenger for Recorder<M> {
    fn poll_doc_to_index(&mut self, timeout: Duration) -> Result<Polled<Document>, MessengerError> {
        self.inner.poll_doc_to_index(timeout)
    }

    fn poll_gathering(&mut self, slice: Duration) -> Result<Polled<Document>, MessengerError> {
        self.inner.poll_gathering(slice)
    }

    fn send_event(&mut self, event: Event) -> Result<(), MessengerError> {
        push(&self.recording.events, event.clone());
        self.inner.send_event(event)
    }

    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError> {
        push(&self.recording.failed, (doc.clone(), failure.clone()));
        self.inner.send_failed(doc, failure)
    }

    fn batch_complete(&mut self, batch: &[Document]) -> Result<(), MessengerError> {
        self.inner.batch_complete(batch)
    }

    fn draining(&self) -> bool {
        self.inner.draining()
    }

    fn upstream_idle(&self) -> bool {
        self.inner.upstream_idle()
    }
}
