//! What a plugin's resource handles stand for in the host: the types the
//! generated bindings map WIT resources to (`publishing.publisher`,
//! `sql.rows`, `lending.batch`).
//!
//! They sit below both sides: `bindings` names them without naming `host/`,
//! and `host/` serves the interfaces they belong to (`host::publisher`,
//! `host::sql`, `host::lending`).

use tokio_postgres::types::Type;

use crate::core::document::Document;

/// Where a connector's published documents go. The host's publisher
/// implements it; `publish` blocks while the pipeline is full.
pub trait PublishSink: Send {
    /// Accept `doc`, or refuse it with a message the connector will see.
    /// Waiting for room ends at `deadline`, the end of the connector's call.
    fn publish(&mut self, doc: Document, deadline: std::time::Instant) -> Result<(), String>;

    /// The connector expects to publish about `documents` in all (the
    /// `progress` interface); the later word counts. A sink that shows no
    /// progress ignores it.
    fn expect(&mut self, documents: u64) {
        let _ = documents;
    }
}

/// The host object behind a connector's `publisher` handle.
pub struct Publisher {
    sink: Box<dyn PublishSink>,
    run_id: String,
}

impl Publisher {
    pub(crate) fn new(sink: Box<dyn PublishSink>, run_id: String) -> Self {
        Self { sink, run_id }
    }

    /// Stamp `doc` with the run's id and hand it to the sink, waiting for
    /// room until `deadline`.
    pub(crate) fn publish(
        &mut self,
        mut doc: Document,
        deadline: std::time::Instant,
    ) -> Result<(), String> {
        doc.set_run_id(Some(self.run_id.clone()));
        self.sink.publish(doc, deadline)
    }

    pub(crate) fn expect(&mut self, documents: u64) {
        self.sink.expect(documents);
    }
}

/// The rows of one query: the cursor they are read through (`host::sql`
/// reads and ends them).
pub struct SqlRows {
    pub(crate) database: String,
    /// Which query of its connection this is.
    pub(crate) serial: u64,
    pub(crate) cursor: String,
    pub(crate) columns: Vec<(String, Type)>,
    /// Rows handed over so far: where a refused page puts the cursor back.
    pub(crate) delivered: u64,
    pub(crate) done: bool,
    /// Why every later `next` fails, once one row could not be handed over.
    pub(crate) failed: Option<String>,
}

/// What a `batch` handle stands for: the documents lent for the call in
/// progress. There is one per call, and its rep means nothing: a borrow
/// cannot outlive the call it is lent for.
pub struct LentBatch;
