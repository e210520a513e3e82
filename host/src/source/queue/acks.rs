//! Acknowledgements, coalesced per channel. Delivery tags on a channel rise
//! one by one; a run of consecutive done deliveries at the bottom of what
//! the channel has open is acknowledged with one `multiple` ack of the
//! highest, a few milliseconds after the first of them was done (at once
//! when [`FULL`] are waiting). A done delivery stuck above one that is not
//! (a failure in its backoff, a message still being processed) is
//! acknowledged alone after [`STRAGGLER`]. Every other outcome (a
//! rejection, a return, a dead letter's ack) is sent alone and leaves the
//! open set only once it is sent, so a `multiple` ack never covers a tag
//! whose fate is not yet on the broker.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lapin::Acker;
use lapin::options::BasicAckOptions;

use super::Shared;

/// How long the first done delivery waits for others to share its ack.
const COALESCE: Duration = Duration::from_millis(5);
/// How many waiting done deliveries are acknowledged without waiting more.
const FULL: usize = 256;
/// How long a done delivery waits for those below it before it is
/// acknowledged alone.
const STRAGGLER: Duration = Duration::from_millis(50);

/// One consumer channel's open deliveries. Holds the channel open while a
/// delivery of it is.
pub(super) struct ChannelAcks {
    /// Kept open while any delivery of it is held.
    _channel: lapin::Channel,
    tags: Mutex<Tags<Acker>>,
    /// Said when done deliveries wait and no flush is planned.
    planned: tokio::sync::Notify,
}

struct Tags<A> {
    /// Delivered on the channel, not yet settled on the broker.
    open: BTreeSet<u64>,
    /// Done, waiting for their ack: the acker and since when.
    done: BTreeMap<u64, (A, Instant)>,
    /// A flush is planned (a task will take what is done).
    flushing: bool,
}

/// What one flush sends.
struct Flush<A> {
    /// The highest of a run at the bottom, and the run's length.
    run: Option<(A, u64)>,
    /// Waited past [`STRAGGLER`] above a delivery not done.
    stragglers: Vec<A>,
}

impl<A> Tags<A> {
    fn new() -> Self {
        Self {
            open: BTreeSet::new(),
            done: BTreeMap::new(),
            flushing: false,
        }
    }

    /// Take what can be acknowledged at `now`.
    fn take(&mut self, now: Instant) -> Flush<A> {
        // The lowest open tag not done: every done tag below it is part of
        // the run at the bottom (the open tags below it are all done).
        let low = self
            .open
            .iter()
            .find(|t| !self.done.contains_key(t))
            .copied();
        let below: Vec<u64> = match low {
            Some(low) => self.done.range(..low).map(|(t, _)| *t).collect(),
            None => self.done.keys().copied().collect(),
        };
        let mut run = None;
        if let Some(&top) = below.last() {
            for t in &below {
                self.open.remove(t);
                let taken = self.done.remove(t);
                if *t == top {
                    run = taken.map(|(a, _)| (a, below.len() as u64));
                }
            }
        }
        let stale: Vec<u64> = self
            .done
            .iter()
            .filter(|(_, (_, since))| now.duration_since(*since) >= STRAGGLER)
            .map(|(t, _)| *t)
            .collect();
        let mut stragglers = Vec::with_capacity(stale.len());
        for t in stale {
            self.open.remove(&t);
            stragglers.extend(self.done.remove(&t).map(|(a, _)| a));
        }
        Flush { run, stragglers }
    }

    /// After a flush's acks were sent: whether done deliveries wait on (the
    /// flush goes on); else no flush is planned any more. Only then, so a
    /// flush never starts while another's acks are still being sent.
    fn sent(&mut self) -> bool {
        self.flushing = !self.done.is_empty();
        self.flushing
    }
}

impl ChannelAcks {
    pub(super) fn new(channel: lapin::Channel) -> Arc<Self> {
        Arc::new(Self {
            _channel: channel,
            tags: Mutex::new(Tags::new()),
            planned: tokio::sync::Notify::new(),
        })
    }

    fn tags(&self) -> std::sync::MutexGuard<'_, Tags<Acker>> {
        self.tags.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A delivery arrived on the channel (tags arrive in rising order).
    pub(super) fn delivered(&self, tag: u64) {
        self.tags().open.insert(tag);
    }

    /// Its outcome, sent alone, reached the broker (or the channel is gone).
    pub(super) fn released(&self, tag: u64) {
        self.tags().open.remove(&tag);
    }

    /// `acker`'s delivery is done. Whether a flush must be started (none
    /// was planned); a full batch cuts the planned one's wait short.
    pub(super) fn done(&self, acker: Acker, tag: u64) -> bool {
        let mut tags = self.tags();
        tags.done.insert(tag, (acker, Instant::now()));
        if tags.done.len() >= FULL {
            self.planned.notify_one();
        }
        !std::mem::replace(&mut tags.flushing, true)
    }
}

/// The flush a [`ChannelAcks::done`] asked for: wait [`COALESCE`] (less
/// when full or closing), acknowledge the run at the bottom, and go on
/// while done deliveries wait above one that is not.
pub(super) async fn flush(shared: Arc<Shared>, acks: Arc<ChannelAcks>) {
    let mut wait = COALESCE;
    loop {
        let mut now = Instant::now();
        if shared.closing.load(Ordering::SeqCst) {
            // Closing: nothing waits for company.
            now += STRAGGLER;
        } else {
            let _ = tokio::time::timeout(wait, acks.planned.notified()).await;
            now = Instant::now();
        }
        let Flush { run, stragglers } = acks.tags().take(now);
        if let Some((acker, count)) = run {
            let all = BasicAckOptions { multiple: true };
            if matches!(acker.ack(all).await, Ok(true)) {
                shared.counts.acked.fetch_add(count, Ordering::Relaxed);
            }
        }
        for acker in stragglers {
            if matches!(acker.ack(BasicAckOptions::default()).await, Ok(true)) {
                shared.counts.acked.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !acks.tags().sent() {
            return;
        }
        wait = STRAGGLER;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tags `open`, of which `done` are done (`old` of them long ago).
    fn tags(open: &[u64], done: &[u64], old: &[u64], now: Instant) -> Tags<u64> {
        let mut tags = Tags::new();
        tags.open.extend(open);
        for &t in done {
            let since = if old.contains(&t) {
                now - STRAGGLER
            } else {
                now
            };
            tags.done.insert(t, (t, since));
        }
        tags.flushing = true;
        tags
    }

    #[test]
    fn a_run_at_the_bottom_is_one_ack_of_its_highest_and_a_done_above_a_gap_waits() {
        let now = Instant::now();
        // 1..=5 open; 1, 2 and 4 done: one ack up to 2; 4 waits for 3.
        let mut t = tags(&[1, 2, 3, 4, 5], &[1, 2, 4], &[], now);
        let flush = t.take(now);
        assert_eq!(flush.run, Some((2, 2)));
        assert!(flush.stragglers.is_empty());
        assert!(t.sent(), "4 waits on: the flush goes on");
        assert_eq!(t.open.iter().copied().collect::<Vec<_>>(), [3, 4, 5]);
        // 3 rejected alone (released): 4 is now at the bottom, 5 not done.
        t.open.remove(&3);
        let flush = t.take(now);
        assert_eq!(flush.run, Some((4, 1)));
        assert!(t.flushing, "planned until its acks are sent");
        assert!(!t.sent() && !t.flushing, "nothing waits: no flush planned");
        assert_eq!(t.open.iter().copied().collect::<Vec<_>>(), [5]);
    }

    #[test]
    fn a_done_delivery_stuck_above_one_not_done_is_acknowledged_alone_in_time() {
        let now = Instant::now();
        let mut t = tags(&[7, 8, 9, 10], &[8, 9, 10], &[9], now);
        let flush = t.take(now);
        assert_eq!(flush.run, None, "7 is not done: no run");
        assert_eq!(flush.stragglers, [9]);
        assert!(t.sent(), "8 and 10 wait on");
        assert_eq!(t.open.iter().copied().collect::<Vec<_>>(), [7, 8, 10]);
        // 7 done: 8 follows it in the run; 10 is at its top.
        t.done.insert(7, (7, now));
        let flush = t.take(now);
        assert_eq!(flush.run, Some((10, 3)));
        assert!(t.open.is_empty() && t.done.is_empty());
    }

    #[test]
    fn with_nothing_open_but_the_done_every_one_is_in_the_run() {
        let now = Instant::now();
        let mut t = tags(&[3, 4], &[3, 4], &[], now);
        assert_eq!(t.take(now).run, Some((4, 2)));
    }
}
