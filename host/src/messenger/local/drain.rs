//! The end of a local run: when nothing more is coming, nobody waits for it.
//!
//! Workers gather a stage batch for up to `stage_batch.wait` and indexers a
//! batch for up to `indexer.batch_timeout`, so that a steady stream goes
//! through in full batches. Once the connector has published its last
//! document those waits only delay the run's end: a one-document run used to
//! take one batch timeout per connector for a few microseconds of work. So
//! the publisher says when its connector is done ([`Drain::source_done`]);
//! from then on a worker takes what is already queued without waiting for
//! more, and an indexer sends a partial batch as soon as its queue is empty
//! and every worker waits on an empty queue of its own ([`Drain::upstream_idle`]).
//!
//! Only batch sizes depend on it, never what is delivered: a document
//! published after the signal (a full sync's deletions, a child's clean-up)
//! goes through like any other, in a batch of its own if need be.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// One local pipeline's end-of-source signal and idle workers, shared by its
/// publisher, workers and indexers.
#[derive(Debug, Default)]
pub(super) struct Drain {
    source_done: AtomicBool,
    /// Workers blocked on an empty queue (see [`Waiting`]).
    waiting: AtomicUsize,
    workers: usize,
}

impl Drain {
    pub(super) fn new(workers: usize) -> Arc<Self> {
        Arc::new(Self {
            workers,
            ..Self::default()
        })
    }

    /// The connector published its last document.
    pub(super) fn finish_source(&self) {
        self.source_done.store(true, Ordering::Release);
    }

    pub(super) fn source_done(&self) -> bool {
        self.source_done.load(Ordering::Acquire)
    }

    /// The source is done and no worker holds or is about to get a document.
    /// A document queued for a worker an instant ago may not have woken it
    /// yet: the indexer then sends a batch early, which costs a batch, not a
    /// document.
    pub(super) fn upstream_idle(&self) -> bool {
        self.source_done() && self.waiting.load(Ordering::Acquire) >= self.workers
    }
}

/// A worker's place in [`Drain::waiting`]: counted from the poll that found
/// its queue empty until it receives a document (or goes).
#[derive(Debug)]
pub(super) struct Waiting {
    drain: Arc<Drain>,
    counted: bool,
}

impl Waiting {
    pub(super) fn new(drain: Arc<Drain>) -> Self {
        Self {
            drain,
            counted: false,
        }
    }

    pub(super) fn drain(&self) -> &Drain {
        &self.drain
    }

    /// The worker found its queue empty and is about to wait.
    pub(super) fn idle(&mut self) {
        if !self.counted {
            self.counted = true;
            self.drain.waiting.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The worker got a document.
    pub(super) fn busy(&mut self) {
        if self.counted {
            self.counted = false;
            self.drain.waiting.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A worker that is gone waits for nothing: it counts as idle for good.
impl Drop for Waiting {
    fn drop(&mut self) {
        self.idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_is_idle_once_the_source_is_done_and_every_worker_waits() {
        let drain = Drain::new(2);
        let (mut a, mut b) = (
            Waiting::new(Arc::clone(&drain)),
            Waiting::new(Arc::clone(&drain)),
        );
        a.idle();
        b.idle();
        assert!(!drain.upstream_idle(), "the source may still publish");
        drain.finish_source();
        assert!(drain.upstream_idle());
        a.busy();
        assert!(!drain.upstream_idle(), "a worker holds a document");
        a.idle();
        a.idle();
        assert!(drain.upstream_idle(), "an idle worker is counted once");
        b.busy();
        drop(b);
        assert!(drain.upstream_idle(), "a worker that is gone holds nothing");
    }
}
