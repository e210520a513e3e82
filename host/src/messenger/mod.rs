//! The seam between Weir's components and how documents travel.
//!
//! A publisher, a worker and an indexer each see only the operations they
//! need: [`PublisherMessenger`], [`WorkerMessenger`], [`IndexerMessenger`].
//! The code that drives them never knows whether documents move through
//! in-memory queues ([`local`]), Kafka topics, or both.
//!
//! Every call is blocking: workers and indexers are threads running
//! synchronous WebAssembly, and a full queue blocks the sender (backpressure).
//! Polls take a timeout so loops can check for shutdown between documents.

pub mod kafka;
pub(crate) mod local;

use std::time::Duration;

use crate::core::document::Document;
use crate::core::event::Event;
pub use crate::core::failure::Failure;

/// Why a messenger call failed. Messenger failures are structural: the run stops.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessengerError {
    /// The other side is gone (the run is shutting down).
    #[error("the {0} queue is closed")]
    Closed(&'static str),
    /// The transport refused this one document (e.g. too large for Kafka):
    /// the document fails, the run goes on.
    #[error("{0}")]
    Refused(String),
    /// Anything else the transport reports.
    #[error("{0}")]
    Transport(String),
}

/// The outcome of a poll.
#[derive(Debug, PartialEq)]
pub enum Polled<T> {
    /// Something arrived.
    Item(T),
    /// Nothing arrived within the timeout; poll again.
    Idle,
    /// Nothing will ever arrive again.
    Closed,
}

/// Which part of a pipeline a serving process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerRole {
    Worker,
    Indexer,
    /// Hybrid mode (`weir hybrid`): worker–indexer pairs in one process.
    /// Its heartbeats keep the spelling processes of every version read.
    #[serde(rename = "worker-indexer")]
    Hybrid,
}

impl ServerRole {
    pub fn processes(self) -> bool {
        matches!(self, Self::Worker | Self::Hybrid)
    }

    pub fn indexes(self) -> bool {
        matches!(self, Self::Indexer | Self::Hybrid)
    }
}

/// What a process serving a pipeline says about itself, every
/// `kafka.heartbeat_interval` and when it stops.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Heartbeat {
    /// `<host>:<pid>:<start time, ms>`: unique per process.
    pub process: String,
    pub role: ServerRole,
    /// False in the last heartbeat, sent as the process stops.
    pub serving: bool,
    /// When it was sent, milliseconds since the Unix epoch (the sender's clock).
    pub time_ms: i64,
    /// Documents the process has processed and indexed since it started.
    pub processed: u64,
    pub indexed: u64,
}

/// A process's latest heartbeat, and when this process received it (ages
/// are measured on one clock: the receiver's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub heartbeat: Heartbeat,
    pub received: std::time::Instant,
}

/// Who serves a pipeline, as its runner can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Servers {
    /// Not known: workers and indexers run in the runner's own process
    /// (their liveness is the runner's).
    Unknown,
    /// The runner cannot reach the cluster the processes announce
    /// themselves through: their silence says nothing about them, and time
    /// spent so is no time stalled.
    Unreachable,
    /// The runner has reached the cluster without a break since `since`
    /// (a round trip through it came back): silence is counted from then
    /// at the earliest. `seen` holds the latest heartbeat of each process
    /// heard recently.
    Heard {
        since: std::time::Instant,
        seen: Vec<Seen>,
    },
}

/// What a publisher (the runner side of a connector) needs.
pub trait PublisherMessenger: Send + Sync {
    /// Hand `doc` to the workers. Blocks while the queue is full, up to `timeout`;
    /// gives the document back when the queue stayed full.
    fn send_for_processing(
        &self,
        doc: Document,
        timeout: Duration,
    ) -> Result<Option<Document>, MessengerError>;
    /// The next lifecycle event, waiting up to `timeout`.
    fn poll_event(&self, timeout: Duration) -> Result<Polled<Event>, MessengerError>;
    /// Who serves the pipeline, as far as the runner can tell (see
    /// [`Servers`]).
    fn servers(&self) -> Servers {
        Servers::Unknown
    }
    /// What an earlier runner of this run did for this connector before it
    /// stopped, when the run is being resumed (Kafka mode keeps a journal):
    /// taken once; `None` when there is nothing to resume.
    fn resumed(&self) -> Option<Resumed> {
        None
    }
    /// The connector has published its last document: where a journal is
    /// kept, it says so once every document is acknowledged, so that a
    /// resumed run does not run the connector again.
    fn publishing_done(&self) -> Result<(), MessengerError> {
        Ok(())
    }
    /// The connector's execute returned: where workers and indexers wait
    /// for fuller batches in this process, they stop waiting for documents
    /// that are not coming (local mode; see `local::drain`).
    fn drain(&self) {}
}

/// A connector's part of a run, as an earlier runner left it: the ids it
/// published (each acknowledged by the transport), in order, the events
/// about its documents, and whether the connector had published its last.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Resumed {
    pub published: Vec<String>,
    pub events: Vec<Event>,
    pub done: bool,
}

/// What a worker needs.
pub trait WorkerMessenger: Send {
    /// The next document to process, waiting up to `timeout`.
    fn poll_doc_to_process(
        &mut self,
        timeout: Duration,
    ) -> Result<Polled<Document>, MessengerError>;
    /// Pass a processed document on to the indexer.
    fn send_for_indexing(&mut self, doc: Document) -> Result<(), MessengerError>;
    /// Dead-letter a document that failed (a no-op where there is nowhere to keep it).
    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError>;
    /// Report an event to the publisher.
    fn send_event(&mut self, event: Event) -> Result<(), MessengerError>;
    /// Acknowledge every document handled so far (offsets, where there are any).
    fn commit_pending_doc_offsets(&mut self) -> Result<(), MessengerError>;
    /// How many polled documents a worker may hold before it commits: the
    /// most a stage batch can gather here. Any number by default.
    fn max_in_hand(&self) -> usize {
        usize::MAX
    }
    /// The source has published its last document: gathering a batch
    /// should take what is queued and not wait for more.
    fn draining(&self) -> bool {
        false
    }
    /// The next document of a batch being gathered, waiting up to `slice`:
    /// as [`Self::poll_doc_to_process`], except that a messenger may let
    /// documents build up for a moment instead of waking for each one (a
    /// batch is what the worker waits for, not the next document).
    fn poll_gathering(&mut self, slice: Duration) -> Result<Polled<Document>, MessengerError> {
        self.poll_doc_to_process(slice)
    }
}

/// What an indexer needs.
pub trait IndexerMessenger: Send {
    /// The next document to index, waiting up to `timeout`.
    fn poll_doc_to_index(&mut self, timeout: Duration) -> Result<Polled<Document>, MessengerError>;
    /// Report an event to the publisher.
    fn send_event(&mut self, event: Event) -> Result<(), MessengerError>;
    /// Dead-letter a document the backend refused.
    fn send_failed(&mut self, doc: Document, failure: &Failure) -> Result<(), MessengerError>;
    /// Remove from `batch` (the documents polled since the last
    /// `batch_complete`, in order) those this indexer no longer owns: their
    /// partitions were reassigned since they were polled. Their new owner gets
    /// them again; indexing them here too could put an old version last.
    fn drop_revoked(&mut self, _batch: &mut Vec<Document>) {}
    /// A batch reached a final state (indexed or failed): its offsets may be committed.
    fn batch_complete(&mut self, batch: &[Document]) -> Result<(), MessengerError>;
    /// The documents of a batch that is complete, to be freed: where is
    /// the messenger's choice (local mode frees them on the connector's
    /// thread that built them, which its allocator does fastest).
    fn retire(&mut self, batch: Vec<Document>) {
        drop(batch);
    }
    /// The next document of a partial batch, waiting up to `slice`: as
    /// [`Self::poll_doc_to_index`], except that a messenger may let
    /// documents build up for a moment instead of waking for each one.
    fn poll_gathering(&mut self, slice: Duration) -> Result<Polled<Document>, MessengerError> {
        self.poll_doc_to_index(slice)
    }
    /// The source has published its last document: a partial batch is
    /// worth looking at often (see [`Self::upstream_idle`]).
    fn draining(&self) -> bool {
        false
    }
    /// Nothing can reach this indexer until more is published: the source
    /// is done and every worker waits on an empty queue. A partial batch
    /// then goes at once instead of at its timeout.
    fn upstream_idle(&self) -> bool {
        false
    }
}

/// The ends of one pipeline's messengers, as the runner wires them. Where
/// workers and indexers are separate processes (Kafka mode), the runner
/// gets only the publisher end.
pub struct MessengerParts {
    pub publisher: Box<dyn PublisherMessenger>,
    pub workers: Vec<Box<dyn WorkerMessenger>>,
    /// One end per indexer instance; each id goes to one of them.
    pub indexers: Vec<Box<dyn IndexerMessenger>>,
}

impl std::fmt::Debug for MessengerParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessengerParts")
            .field("workers", &self.workers.len())
            .field("indexers", &self.indexers.len())
            .finish_non_exhaustive()
    }
}

/// Makes the messengers for one connector's pipeline. Local mode uses
/// [`LocalMessengers`]; tests use [`crate::testing::recording`]; Kafka mode its own.
pub trait MessengerFactory: Send + Sync {
    /// Messengers for `pipeline` in run `run_id`, with `workers` worker
    /// ends and up to `indexers` indexer ends (none where indexers are other
    /// processes).
    fn create(
        &self,
        pipeline: &str,
        workers: usize,
        indexers: usize,
        run_id: &str,
    ) -> Result<MessengerParts, MessengerError>;
    /// Run `run_id` ended: release what it alone used (e.g. its event topics).
    fn run_ended(&self, _run_id: &str) {}
    /// Whether the messengers keep failed documents themselves (a
    /// dead-letter topic); otherwise the runner keeps them in a file.
    fn keeps_dead_letters(&self) -> bool {
        false
    }
    /// Where these messengers keep `pipeline`'s failed documents (its fail
    /// topic), when they keep them.
    fn dead_letters_in(&self, _pipeline: &str) -> Option<String> {
        None
    }
    /// Whether the pipeline's workers and indexers are other processes
    /// (Kafka mode): [`MessengerFactory::create`] then makes only the
    /// publisher end, and the runner learns of them from their heartbeats.
    fn workers_are_remote(&self) -> bool {
        false
    }
}

/// In-memory queues of a given capacity.
#[derive(Debug, Clone, Copy)]
pub struct LocalMessengers {
    /// Documents each queue holds.
    pub capacity: usize,
    /// Bytes of documents each queue holds (a larger document goes alone).
    pub max_bytes: usize,
}

impl MessengerFactory for LocalMessengers {
    fn create(
        &self,
        _pipeline: &str,
        workers: usize,
        indexers: usize,
        _run_id: &str,
    ) -> Result<MessengerParts, MessengerError> {
        let local =
            local::LocalMessenger::new(self.capacity, self.max_bytes).into_parts(workers, indexers);
        Ok(MessengerParts {
            publisher: Box::new(local.publisher),
            workers: local
                .workers
                .into_iter()
                .map(|w| Box::new(w) as Box<dyn WorkerMessenger>)
                .collect(),
            indexers: local
                .indexers
                .into_iter()
                .map(|i| Box::new(i) as Box<dyn IndexerMessenger>)
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ServerRole;

    /// A heartbeat names its role as every version of Weir reads it:
    /// Hybrid mode's processes stay `worker-indexer` on the wire.
    #[test]
    fn server_roles_keep_their_wire_spelling() {
        for (role, text) in [
            (ServerRole::Worker, "\"worker\""),
            (ServerRole::Indexer, "\"indexer\""),
            (ServerRole::Hybrid, "\"worker-indexer\""),
        ] {
            assert_eq!(serde_json::to_string(&role).expect("serialize"), text);
            let read: ServerRole = serde_json::from_str(text).expect("deserialize");
            assert_eq!(read, role);
        }
        assert!(ServerRole::Hybrid.processes() && ServerRole::Hybrid.indexes());
    }
}
