//! The seam between a source that never ends (a Kafka topic, a message
//! queue, documents pushed to `weir serve`) and the run that consumes it for
//! a connector (`wit/messages.wit`).
//!
//! A [`Source`] hands out [`Delivery`]s; the run tracks the documents the
//! connector publishes for each and, once they are all done, tells the source
//! what became of it ([`Settled`]): the source then acknowledges the message,
//! commits its offset, or applies its own retry rules. Nothing here knows a
//! client library: each source's backend lives with the part that knows its
//! client.

use std::time::Duration;

/// One message as its source delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The source's own name for this delivery, handed back in
    /// [`Source::settle`]; unique among the deliveries not yet settled.
    pub token: u64,
    /// Where it came from, for messages and dead letters: `topic/partition/offset`,
    /// or the queue's name.
    pub origin: String,
    /// A record's key, or a queue message's id.
    pub key: Option<Vec<u8>>,
    pub body: Vec<u8>,
    /// Headers or properties, in the order received.
    pub headers: Vec<(String, Vec<u8>)>,
    /// When the source says it was written, in ms since the Unix epoch.
    pub timestamp_ms: Option<i64>,
    /// 1 the first time; the broker's delivery count on redeliveries.
    pub attempt: u32,
}

/// Why [`Source::receive`] gave nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiveError {
    /// The source is closed: the run is stopping.
    #[error("the source is closed: the run is stopping")]
    Stopping,
    /// The source cannot go on (a refused grant, a client that cannot be
    /// made); reconnecting is the source's own business and never this.
    #[error("{0}")]
    Failed(String),
}

/// What became of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Every document made from it is indexed or dropped (or it made none).
    Done,
    /// At least one of its documents failed (and was dead-lettered by the
    /// run); `error` is the first failure's message. A source that retries
    /// (a queue) delivers it again; one that does not (a topic) moves on.
    Failed { error: String },
    /// The connector found it is not a valid document: dead-letter it now,
    /// with `reason`, never retried.
    Invalid { reason: String },
    /// The run stopped before it was done: deliver it again, not counted as
    /// a failed attempt.
    Abandoned,
}

/// A source of messages for one connector of one run. Shared by the
/// connector's thread (receive) and the run's (settle), so `&self`.
pub trait Source: Send + Sync {
    /// Up to `max` deliveries, waiting at most `wait` for the first; empty
    /// when none came in time, or while the source is (re)connecting.
    fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, ReceiveError>;
    /// The connector has finished delivery `token`: every document it
    /// made of it is published (in the run's queue or topic), not yet
    /// done. Called at most once, before [`Source::settle`]; a source that
    /// answers its sender then (documents pushed to `weir serve`) does so
    /// here. Never blocks (called on the connector's thread).
    fn finished(&self, _token: u64) {}
    /// What became of delivery `token`. Called once per delivery.
    fn settle(&self, token: u64, settled: Settled);
    /// The run is stopping: deliveries not settled are abandoned (delivered
    /// again later), and `receive` answers [`ReceiveError::Stopping`] from
    /// now on.
    fn close(&self);
    /// Stop taking messages for now (consumers closed, messages stay with
    /// the broker); `receive` waits as if none came until [`Source::resume`].
    fn pause(&self) {}
    /// Take messages again after [`Source::pause`].
    fn resume(&self) {}
    /// What it reads, for messages: `kafka orders (group weir-orders)`.
    fn describe(&self) -> String;
}
