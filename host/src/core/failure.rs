//! Why a document failed, and the record a failed document is kept as.
//!
//! [`Failure`] is what a worker or an indexer says about a document it
//! gives up on; [`DeadLetter`] is how the document is kept afterwards (a
//! line of a local run's dead-letter file, or a letter read back from a
//! Kafka fail topic), and what `weir replay` reads.

use serde::{Deserialize, Serialize};

/// Why a document was dead-lettered, for messengers that keep failed documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The stage or indexer plugin that failed the document.
    pub plugin: String,
    pub message: String,
    /// How many times the document was attempted.
    pub attempts: u32,
    /// The kind of error and the plugin's own words, where a plugin said
    /// them (a stage's failures): what test transcripts show.
    pub reason: Option<Reason>,
}

/// The kind of a plugin's error (`document`, `transient`, `panic`,
/// `deadline`, ...) and its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub error: String,
    pub message: String,
}

/// One line of a dead-letter file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub id: String,
    pub run_id: Option<String>,
    pub pipeline: String,
    /// The stage or indexer that failed it.
    pub plugin: String,
    pub error: String,
    pub attempts: u32,
    /// RFC 3339, UTC.
    pub failed_at: String,
    pub document: serde_json::Value,
}
