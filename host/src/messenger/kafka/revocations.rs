//! Which partitions were revoked since a document was polled: an indexer
//! (and a Hybrid pair, whose worker sees the revocations) leaves the
//! documents of a partition that moved on to their new owner.

use foldhash::HashMap;

use crate::core::document::Document;

/// Revocations seen by an indexer, to tell documents polled before their
/// partition was revoked (the new owner has them) from those polled after it
/// came back (ours).
#[derive(Debug, Default)]
pub(super) struct Revocations {
    pub(super) count: u64,
    pub(super) latest: HashMap<i32, u64>,
}

impl Revocations {
    pub(super) fn revoke(&mut self, partitions: &[i32]) {
        self.count += 1;
        for &p in partitions {
            self.latest.insert(p, self.count);
        }
    }

    /// Take out of `batch` the documents whose partition was revoked after
    /// they were polled; `polled` is each one's (partition, generation), in
    /// order. Their partition's new owner indexes them (from the committed
    /// offset, which they are not below).
    pub(super) fn drop_revoked(
        &self,
        batch: &mut Vec<Document>,
        polled: impl ExactSizeIterator<Item = (i32, u64)>,
    ) {
        if self.latest.is_empty() {
            return;
        }
        if batch.len() != polled.len() {
            tracing::warn!("batch and polled documents disagree; keeping the batch");
            return;
        }
        let before = batch.len();
        let mut polled = polled;
        batch.retain(|_| {
            polled
                .next()
                .is_none_or(|(p, generation)| !self.revoked_since(p, generation))
        });
        if batch.len() < before {
            tracing::info!(
                dropped = before - batch.len(),
                "left documents of revoked partitions to their new owner"
            );
        }
    }

    /// Whether a document of `partition` polled at `generation` was revoked since.
    pub(super) fn revoked_since(&self, partition: i32, generation: u64) -> bool {
        self.latest
            .get(&partition)
            .is_some_and(|&revoked_at| revoked_at > generation)
    }
}
