//! The queue source: a RabbitMQ queue (or a topic's shared durable
//! subscription) consumed for a streaming connector with the JMS trigger
//! runner's rules (docs/queue-trigger.md). The only part that knows lapin.
//!
//! Threads: the source runs its own small tokio runtime. One task
//! ([`session::supervise`]) keeps a connection and `concurrency` consumers
//! (each its own channel, prefetch bounded) and rebuilds them when the
//! connection is lost, on restart, and after a pause; consumers put what
//! they get in a buffer [`QueueSource::receive`] takes batches from. A
//! delivery handed out is kept (its acker, its body for a dead letter) until
//! the run settles it ([`settle`]): acknowledged when done (with the done
//! deliveries next to it on its channel, [`acks`]), rejected back to
//! the queue after a backoff when failed below `max_attempts`, dead-lettered
//! at `max_attempts` or at once when invalid, requeued when abandoned.

mod acks;
mod convert;
mod session;
mod settle;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use tokio::sync::watch;

use super::Opening;
use crate::core::messages::{Delivery, ReceiveError, Settled, Source};
use crate::plugin::QueueGrant;

pub use convert::{ATTEMPTS, ERROR, FAILED_AT, SOURCE};

/// Where a queue source is, for tests and the status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    /// No consumer yet since the start, the last restart or reconnect: the
    /// source retries every second.
    Connecting,
    /// Every consumer is up.
    Running,
    /// Paused: no consumer; messages wait on the broker.
    Paused,
    /// Closed: what was in flight went back to the queue.
    Closed,
}

/// What the supervisor is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wanted {
    paused: bool,
    closed: bool,
    /// Bumped by each restart.
    restarts: u64,
}

/// Counts since the source opened, for tests and benchmarks.
#[derive(Debug, Default)]
pub struct QueueCounts {
    pub acked: AtomicU64,
    pub retried: AtomicU64,
    pub dead_lettered: AtomicU64,
    pub returned: AtomicU64,
    pub connects: AtomicU64,
}

/// One message taken from the queue, not yet handed to the connector.
struct Incoming {
    delivery: lapin::message::Delivery,
    /// Its consumer channel's open deliveries (the channel kept open).
    acks: Arc<acks::ChannelAcks>,
}

/// One message handed to the connector and not yet settled.
struct InFlight {
    delivery: lapin::message::Delivery,
    acks: Arc<acks::ChannelAcks>,
    attempt: u32,
}

/// What the sync side and the runtime's tasks share.
struct Shared {
    grant: QueueGrant,
    /// `queues.<name> (<queue>)`, for dead letters and messages.
    label: String,
    queue: String,
    wanted: watch::Sender<Wanted>,
    state: Mutex<QueueState>,
    state_changed: Condvar,
    buffer: (Sender<Incoming>, Receiver<Incoming>),
    in_flight: Mutex<HashMap<u64, InFlight>>,
    next_token: AtomicU64,
    /// Settling operations not yet answered by the broker.
    pending: AtomicUsize,
    closing: AtomicBool,
    counts: QueueCounts,
    /// The channel dead letters are published on (confirms on), per
    /// connection; `None` while connecting.
    publisher: tokio::sync::Mutex<Option<lapin::Channel>>,
}

impl Shared {
    fn set_state(&self, state: QueueState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.state_changed.notify_all();
    }

    fn state(&self) -> QueueState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wanted(&self) -> Wanted {
        *self.wanted.borrow()
    }
}

/// A granted queue, consumed. Opening never blocks: it connects in the
/// background (state [`QueueState::Connecting`] until every consumer is up).
pub struct QueueSource {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for QueueSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSource")
            .field("label", &self.shared.label)
            .finish_non_exhaustive()
    }
}

impl QueueSource {
    /// Open `grant` for the connector `at` names. `Err` only for a grant
    /// that cannot work (its problems) or a runtime that cannot start.
    pub(crate) fn open(grant: &QueueGrant, at: &Opening<'_>) -> Result<Self, String> {
        Self::open_named(grant, at.name)
    }

    /// Open `grant`, known to the plugin as `name`.
    pub fn open_named(grant: &QueueGrant, name: &str) -> Result<Self, String> {
        let problems = grant.problems(&format!("grants.queues.{name}"));
        if !problems.is_empty() {
            return Err(problems.to_string());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("weir-queue")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the queue source's runtime: {e}"))?;
        let queue = grant.queue_name();
        let (wanted, _) = watch::channel(Wanted {
            paused: false,
            closed: false,
            restarts: 0,
        });
        let shared = Arc::new(Shared {
            label: format!("queues.{name} ({queue})"),
            queue,
            grant: grant.clone(),
            wanted,
            state: Mutex::new(QueueState::Connecting),
            state_changed: Condvar::new(),
            buffer: crossbeam_channel::unbounded(),
            in_flight: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
            pending: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            counts: QueueCounts::default(),
            publisher: tokio::sync::Mutex::new(None),
        });
        runtime.spawn(session::supervise(shared.clone()));
        Ok(Self {
            shared,
            runtime: Some(runtime),
        })
    }

    /// Where the source is now.
    pub fn state(&self) -> QueueState {
        self.shared.state()
    }

    /// Wait up to `within` for state `state`; whether it came.
    pub fn wait_for(&self, state: QueueState, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut now = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *now != state {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            now = self
                .shared
                .state_changed
                .wait_timeout(now, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Rebuild every consumer (after the deliveries they hold are settled
    /// or returned); a paused source stays paused.
    pub fn restart(&self) {
        if !self.shared.wanted().closed {
            self.shared.wanted.send_modify(|w| w.restarts += 1);
        }
    }

    /// What the source has done since it opened.
    pub fn counts(&self) -> &QueueCounts {
        &self.shared.counts
    }

    /// Deliveries handed out and not settled.
    pub fn in_flight(&self) -> usize {
        self.shared
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn run<F: std::future::Future<Output = ()> + Send + 'static>(&self, task: F) {
        if let Some(runtime) = &self.runtime {
            self.shared.pending.fetch_add(1, Ordering::SeqCst);
            let shared = self.shared.clone();
            runtime.spawn(async move {
                task.await;
                shared.pending.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }
}

impl Source for QueueSource {
    fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, ReceiveError> {
        let shared = &self.shared;
        if shared.closing.load(Ordering::SeqCst) {
            return Err(ReceiveError::Stopping);
        }
        if shared.wanted().paused {
            // Paused: wait as if nothing came (a resume ends the wait).
            let until = Instant::now() + wait;
            while shared.wanted().paused && !shared.closing.load(Ordering::SeqCst) {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Vec::new());
                }
                std::thread::sleep(left.min(Duration::from_millis(20)));
            }
        }
        let limit = max.min(shared.grant.batch_size as usize).max(1);
        let rx = &shared.buffer.1;
        let start = Instant::now();
        let mut batch: Vec<Incoming> = Vec::new();
        // The first message, waiting at most `wait`; then what comes within
        // `batch_wait` of it, up to the batch size. A pause cuts it short.
        let mut deadline = start + wait;
        while batch.len() < limit {
            if shared.wanted().paused || shared.closing.load(Ordering::SeqCst) {
                break;
            }
            let now = Instant::now();
            let next = match rx.try_recv() {
                Ok(incoming) => Some(incoming),
                Err(_) if now >= deadline => break,
                Err(_) => match rx.recv_timeout((deadline - now).min(Duration::from_millis(100))) {
                    Ok(incoming) => Some(incoming),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            };
            if let Some(incoming) = next {
                if batch.is_empty() {
                    deadline = Instant::now() + shared.grant.batch_wait;
                }
                batch.push(incoming);
            }
        }
        let paused = shared.wanted().paused || shared.closing.load(Ordering::SeqCst);
        let mut out = Vec::with_capacity(batch.len());
        let mut in_flight = shared
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for incoming in batch {
            if paused {
                // Paused or closing while it was collected: back to the
                // queue, not handed out.
                self.run(settle::give_back(shared.clone(), incoming));
                continue;
            }
            let Incoming { delivery, acks } = incoming;
            let token = shared.next_token.fetch_add(1, Ordering::Relaxed);
            let attempt = convert::attempt(&delivery.properties, delivery.redelivered);
            let parts = convert::parts(&delivery.properties);
            out.push(Delivery {
                token,
                origin: shared.queue.clone(),
                key: parts.key,
                body: delivery.data.clone(),
                headers: parts.headers,
                timestamp_ms: parts.timestamp_ms,
                attempt,
            });
            in_flight.insert(
                token,
                InFlight {
                    delivery,
                    acks,
                    attempt,
                },
            );
        }
        drop(in_flight);
        if out.is_empty() && shared.closing.load(Ordering::SeqCst) {
            return Err(ReceiveError::Stopping);
        }
        Ok(out)
    }

    fn settle(&self, token: u64, settled: Settled) {
        let taken = self
            .shared
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&token);
        match (taken, settled) {
            (Some(message), Settled::Done) => {
                // Acknowledged with the done deliveries around it, without a
                // task of its own (the hot path: one flush per few ms).
                let tag = message.delivery.delivery_tag;
                if message.acks.done(message.delivery.acker, tag) {
                    self.run(acks::flush(self.shared.clone(), message.acks));
                }
            }
            (Some(message), settled) => {
                self.run(settle::settle(self.shared.clone(), message, settled));
            }
            (None, _) => {}
        }
    }

    fn close(&self) {
        let shared = &self.shared;
        if shared.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        // The supervisor cancels the consumers, then returns the buffer and
        // every delivery not settled (not as failures: see
        // docs/queue-trigger.md for the broker's count), waits for what is
        // being settled (2 s at most) and closes the connection.
        shared.wanted.send_modify(|w| w.closed = true);
        self.wait_for(QueueState::Closed, Duration::from_secs(10));
    }

    fn pause(&self) {
        if !self.shared.wanted().closed {
            self.shared.wanted.send_modify(|w| w.paused = true);
        }
    }

    fn resume(&self) {
        if !self.shared.wanted().closed {
            self.shared.wanted.send_modify(|w| w.paused = false);
        }
    }

    fn describe(&self) -> String {
        let server = self
            .shared
            .grant
            .server()
            .map(|s| s.address())
            .unwrap_or_default();
        format!("rabbitmq {} at {server}", self.shared.label)
    }
}

impl Drop for QueueSource {
    fn drop(&mut self) {
        self.close();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}
