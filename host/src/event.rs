//! Lifecycle events: how workers and indexers tell the publisher what became
//! of each document.

use serde::{Deserialize, Serialize};

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

/// One event about one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub document_id: String,
    pub run_id: Option<String>,
    pub kind: EventKind,
    /// Why, for FAIL events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Event {
    pub fn new(document: &crate::document::Document, kind: EventKind) -> Self {
        Self {
            document_id: document.id().to_owned(),
            run_id: document.run_id().map(str::to_owned),
            kind,
            message: None,
        }
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}
