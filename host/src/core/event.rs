//! Lifecycle events: how workers and indexers tell the publisher what became
//! of each document.

use serde::{Deserialize, Serialize};

use crate::core::document::Document;
use crate::core::text::cut_at;

/// What happened to a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventKind {
    /// A stage made a new (child) document; it is now pending too.
    Create,
    /// The document was indexed.
    Finish,
    /// The document failed in a stage or in the indexer.
    Fail,
    /// A stage dropped the document; it will not be indexed.
    Drop,
}

impl EventKind {
    /// Whether the event ends a document's life.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Create)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Finish => "FINISH",
            Self::Fail => "FAIL",
            Self::Drop => "DROP",
        }
    }
}

/// The longest reason an event carries, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;

/// One event about one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub document_id: String,
    pub run_id: Option<String>,
    pub kind: EventKind,
    /// Why, for FAIL events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Kafka and Hybrid modes: the worker's pass over a source record that
    /// made this document, when that pass created children. On a CREATE it
    /// says which pass created the child; on a terminal event it ties the
    /// event to the CREATEs that must be counted before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u64>,
    /// On a terminal event with an `attempt`: how many CREATE events of that
    /// pass precede it. The runner applies the event only once it has seen
    /// them, so a parent indexed before its children's CREATEs arrive can
    /// never complete the run early.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub after_creates: u32,
    /// On a CREATE: the id of the published document the child descends
    /// from (its parent's, or its parent's root for a grandchild), so the
    /// runner knows which children each version of a document made (see
    /// `run/family.rs`). Absent on other events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// The stage that made the child (CREATE), dropped the document (DROP)
    /// or failed it (FAIL); none for the indexer's events. For traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Event {
    pub fn new(document: &Document, kind: EventKind) -> Self {
        Self {
            document_id: document.id().to_owned(),
            run_id: document.run_id().map(str::to_owned),
            kind,
            message: None,
            attempt: None,
            after_creates: 0,
            root: None,
            stage: None,
        }
    }

    /// A CREATE for `child`, made from the published document `root`.
    pub fn created(child: &Document, root: &str) -> Self {
        Self {
            root: Some(root.to_owned()),
            ..Self::new(child, EventKind::Create)
        }
    }

    /// Say which stage it was.
    pub fn with_stage(mut self, stage: &str) -> Self {
        self.stage = Some(stage.to_owned());
        self
    }

    /// Say why; at most [`MAX_MESSAGE_BYTES`] of it travels.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        let message = message.into();
        self.message = Some(match cut_at(&message, MAX_MESSAGE_BYTES) {
            Some(kept) => format!("{kept}..."),
            None => message,
        });
        self
    }
}
