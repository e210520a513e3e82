//! What a worker's consumer does when partitions move: commit the work
//! completed on the revoked ones, and which offsets a worker may commit.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::delivery::{Shared, Tracker};
use super::revocations::Revocations;
use super::wire::log_assignment;

/// Commits completed work when partitions are revoked.
pub(super) struct WorkerRebalance {
    pub(super) shared: Arc<Shared>,
    pub(super) member: usize,
    pub(super) topic: String,
    /// A Hybrid pair's revocations, shared with its indexer.
    pub(super) pair: Option<Arc<Mutex<Revocations>>>,
}

super::client::quiet_client_context!(WorkerRebalance);

impl ConsumerContext for WorkerRebalance {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(revoked) = rebalance {
            let partitions: Vec<i32> = revoked.elements().iter().map(|e| e.partition()).collect();
            if !self
                .shared
                .wait_delivered(self.member, Some(&partitions), Duration::from_secs(30))
            {
                tracing::warn!(
                    "revoking partitions with deliveries still in flight; their records will be redelivered"
                );
            }
            let mut tracker = self.shared.lock();
            let tpl = committable_list(&tracker, &self.topic, self.member, Some(&partitions));
            for &p in &partitions {
                tracker.partitions.remove(&(self.member, p));
            }
            drop(tracker);
            // A Hybrid pair's indexer leaves what is still queued from these
            // partitions to their new owner (it is not committed).
            if let Some(pair) = &self.pair {
                pair.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .revoke(&partitions);
            }
            if tpl.count() > 0
                && let Err(e) = consumer.commit(&tpl, CommitMode::Sync)
            {
                tracing::warn!(error = %e, "commit on revoke failed; records will be redelivered");
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        log_assignment("worker", rebalance);
    }
}

/// Offsets consumer `member` may commit: for each partition it tracks (or
/// those listed), the offset below which every record is complete. Nothing
/// after a delivery failure.
pub(super) fn committable_list(
    tracker: &Tracker,
    topic: &str,
    member: usize,
    only: Option<&[i32]>,
) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    if tracker.failure.is_some() {
        return tpl;
    }
    for (&(m, partition), track) in &tracker.partitions {
        if m != member || only.is_some_and(|ps| !ps.contains(&partition)) {
            continue;
        }
        if let Some(offset) = track.committable() {
            let _ = tpl.add_partition_offset(topic, partition, Offset::Offset(offset));
        }
    }
    tpl
}
