//! Documents handed back to the thread that built them, to be freed there.
//!
//! A local pipeline's documents are built on a connector's thread (its
//! plugin's `from-json` and `publish` calls) and done with on an indexer's.
//! Freed where they end, every block of every document is a free from
//! another thread: the allocator hands it to its owner with an atomic
//! operation on a page the owner is allocating from, and the owner's next
//! allocations there miss the cache. Profiled on the local benchmark, the
//! connector's allocations were ~40% of its thread and the indexer's frees
//! a fifth of its own. So an indexer hands each finished batch back
//! ([`Spent::retire`]) and the publisher frees what came back before it
//! queues the next document ([`Returns::free`]), on the connector's thread,
//! where the freed blocks are the next ones allocated, still in cache.
//!
//! The way back holds a few batches: when it is full (the connector has
//! stopped publishing, or is busy in its plugin), the indexer frees the
//! batch itself, as before. Nothing waits on it either way.

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::core::document::Document;

/// Batches the way back holds.
const BATCHES: usize = 4;

/// The way back, both ends.
pub(super) fn way_back() -> (Spent, Returns) {
    let (tx, rx) = bounded(BATCHES);
    (Spent(tx), Returns(rx))
}

/// The indexers' end.
#[derive(Debug, Clone)]
pub(super) struct Spent(Sender<Vec<Document>>);

impl Spent {
    /// Hand `batch` back to be freed by the publisher, or free it here
    /// when the way back is full or its other end is gone.
    pub(super) fn retire(&self, batch: Vec<Document>) {
        if batch.capacity() > 0 {
            drop(self.0.try_send(batch));
        }
    }
}

/// The publisher's end.
#[derive(Debug, Clone)]
pub(super) struct Returns(Receiver<Vec<Document>>);

impl Returns {
    /// Free the batches handed back so far (at most what the way back
    /// holds, so one call never frees without end).
    pub(super) fn free(&self) {
        for batch in self.0.try_iter().take(BATCHES) {
            drop(batch);
        }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Vec<Document> {
        (0..n).map(|i| Document::new(format!("d{i}"))).collect()
    }

    #[test]
    fn retired_batches_wait_for_the_publisher_and_a_full_or_closed_way_back_never_blocks() {
        let (spent, returns) = way_back();
        for _ in 0..BATCHES + 3 {
            // Past what it holds, the indexer frees the batch itself.
            spent.retire(batch(3));
        }
        assert_eq!(returns.held(), BATCHES);
        returns.free();
        assert_eq!(returns.held(), 0);
        // An empty batch is not worth the trip.
        spent.retire(Vec::new());
        assert_eq!(returns.held(), 0);
        // With the publisher gone, the indexer frees the batch itself
        // instead of waiting for a way back that nobody empties.
        drop(returns);
        spent.retire(batch(2));
    }
}
