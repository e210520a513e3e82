//! The in-process messenger: bounded queues between publisher, workers and
//! indexer. A full queue blocks its sender, so a fast connector never runs
//! ahead of its workers by more than the queue's capacity.
//!
//! Shutdown is by closing: when the publisher side is dropped, workers drain
//! the source queue and see [`Polled::Closed`]; when every worker is gone, the
//! indexer drains the destination queue and sees it too.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender, bounded, unbounded};

use super::{
    Failure, IndexerMessenger, MessengerError, Polled, PublisherMessenger, WorkerMessenger,
};
use crate::document::Document;
use crate::event::Event;

/// Builds the three ends of a local pipeline.
#[derive(Debug)]
pub struct LocalMessenger {
    source: (Sender<Document>, Receiver<Document>),
    dest: (Sender<Document>, Receiver<Document>),
    events: (Sender<Event>, Receiver<Event>),
}

impl LocalMessenger {
    /// Queues holding at most `capacity` documents each. Events are not
    /// bounded: a worker must never block on reporting, or a full event queue
    /// could stall the publisher that drains it.
    pub fn new(capacity: usize) -> Self {
        Self {
            source: bounded(capacity.max(1)),
            dest: bounded(capacity.max(1)),
            events: unbounded(),
        }
    }

    pub fn publisher(&self) -> LocalPublisherMessenger {
        LocalPublisherMessenger {
            source: self.source.0.clone(),
            events: self.events.1.clone(),
        }
    }

    pub fn worker(&self) -> LocalWorkerMessenger {
        LocalWorkerMessenger {
            source: self.source.1.clone(),
            dest: self.dest.0.clone(),
            events: self.events.0.clone(),
        }
    }

    pub fn indexer(&self) -> LocalIndexerMessenger {
        LocalIndexerMessenger {
            dest: self.dest.1.clone(),
            events: self.events.0.clone(),
        }
    }

    /// Hand out the ends and drop the builder's own senders, so that closing
    /// works: the queues close when the ends given out are dropped.
    pub fn into_parts(self, workers: usize) -> LocalParts {
        let parts = LocalParts {
            publisher: self.publisher(),
            workers: (0..workers).map(|_| self.worker()).collect(),
            indexer: self.indexer(),
        };
        drop(self);
        parts
    }
}

/// The ends of one local pipeline.
#[derive(Debug)]
pub struct LocalParts {
    pub publisher: LocalPublisherMessenger,
    pub workers: Vec<LocalWorkerMessenger>,
    pub indexer: LocalIndexerMessenger,
}

fn poll<T>(rx: &Receiver<T>, timeout: Duration) -> Polled<T> {
    match rx.recv_timeout(timeout) {
        Ok(item) => Polled::Item(item),
        Err(RecvTimeoutError::Timeout) => Polled::Idle,
        Err(RecvTimeoutError::Disconnected) => Polled::Closed,
    }
}

#[derive(Debug, Clone)]
pub struct LocalPublisherMessenger {
    source: Sender<Document>,
    events: Receiver<Event>,
}

impl PublisherMessenger for LocalPublisherMessenger {
    fn send_for_processing(
        &self,
        doc: Document,
        timeout: Duration,
    ) -> Result<Option<Document>, MessengerError> {
        match self.source.send_timeout(doc, timeout) {
            Ok(()) => Ok(None),
            Err(SendTimeoutError::Timeout(doc)) => Ok(Some(doc)),
            Err(SendTimeoutError::Disconnected(_)) => Err(MessengerError::Closed("processing")),
        }
    }

    fn poll_event(&self, timeout: Duration) -> Result<Polled<Event>, MessengerError> {
        Ok(poll(&self.events, timeout))
    }
}

#[derive(Debug, Clone)]
pub struct LocalWorkerMessenger {
    source: Receiver<Document>,
    dest: Sender<Document>,
    events: Sender<Event>,
}

impl WorkerMessenger for LocalWorkerMessenger {
    fn poll_doc_to_process(
        &mut self,
        timeout: Duration,
    ) -> Result<Polled<Document>, MessengerError> {
        Ok(poll(&self.source, timeout))
    }

    fn send_for_indexing(&mut self, doc: Document) -> Result<(), MessengerError> {
        self.dest
            .send(doc)
            .map_err(|_| MessengerError::Closed("indexing"))
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

#[derive(Debug, Clone)]
pub struct LocalIndexerMessenger {
    dest: Receiver<Document>,
    events: Sender<Event>,
}

impl IndexerMessenger for LocalIndexerMessenger {
    fn poll_doc_to_index(&mut self, timeout: Duration) -> Result<Polled<Document>, MessengerError> {
        Ok(poll(&self.dest, timeout))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    const T: Duration = Duration::from_millis(10);

    #[test]
    fn documents_flow_and_queues_close_in_order() {
        let parts = LocalMessenger::new(2).into_parts(1);
        let (publisher, mut worker, mut indexer) = (
            parts.publisher,
            parts.workers.into_iter().next().expect("worker"),
            parts.indexer,
        );
        assert_eq!(
            publisher.send_for_processing(Document::new("a"), T),
            Ok(None)
        );
        let Polled::Item(doc) = worker.poll_doc_to_process(T).expect("poll") else {
            panic!("no doc")
        };
        worker
            .send_event(Event::new(&doc, EventKind::Create))
            .expect("event");
        worker.send_for_indexing(doc).expect("send");
        assert!(matches!(indexer.poll_doc_to_index(T), Ok(Polled::Item(d)) if d.id() == "a"));
        assert!(
            matches!(publisher.poll_event(T), Ok(Polled::Item(e)) if e.kind == EventKind::Create)
        );

        drop(publisher);
        assert_eq!(worker.poll_doc_to_process(T), Ok(Polled::Closed));
        assert_eq!(
            indexer.poll_doc_to_index(T),
            Ok(Polled::Idle),
            "a worker is still alive"
        );
        drop(worker);
        assert_eq!(indexer.poll_doc_to_index(T), Ok(Polled::Closed));
    }

    #[test]
    fn a_full_queue_applies_backpressure() {
        let parts = LocalMessenger::new(1).into_parts(1);
        assert_eq!(
            parts.publisher.send_for_processing(Document::new("1"), T),
            Ok(None)
        );
        let refused = parts
            .publisher
            .send_for_processing(Document::new("2"), T)
            .expect("open");
        assert_eq!(refused.map(|d| d.id().to_owned()).as_deref(), Some("2"));
    }
}
