//! Where a worker's processed documents go: the destination topic, or a
//! Hybrid pair's in-memory queue to its indexer.

use std::sync::{Arc, Mutex};

use super::delivery::Origin;
use super::revocations::Revocations;
use super::wire::Lineage;
use crate::core::document::Document;

/// Where a worker's processed documents go.
pub(super) enum Output {
    /// The destination topic, read by the indexers' group.
    Topic(String),
    /// Its Hybrid pair's indexer's queue, until the worker stops.
    Hybrid {
        queue: Option<crossbeam_channel::Sender<Queued>>,
        revocations: Arc<Mutex<Revocations>>,
    },
}

/// A processed document on its way to a Hybrid pair's indexer.
pub(super) struct Queued {
    pub(super) doc: Document,
    pub(super) origin: Origin,
    /// Revocations of the pair when it was polled.
    pub(super) generation: u64,
    pub(super) lineage: Option<Lineage>,
}
