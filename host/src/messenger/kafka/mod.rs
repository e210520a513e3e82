//! Kafka messengers: the only part of Weir that knows rdkafka.
//!
//! Topics, per pipeline: `<pipeline>_source` (publisher -> workers, keyed by
//! document id), `<pipeline>_dest` (workers -> indexers, keyed by id),
//! `<pipeline>_fail` (dead letters, with headers saying why), and
//! `<pipeline>_event_<run id>` (one partition, created by the runner).
//!
//! The guarantee is at-least-once with per-id order:
//!
//! - A worker stores a source offset only when the document is processed and
//!   every message it caused (outputs, dead letters, events) is acknowledged
//!   by the broker, and only up to the highest offset below which every record
//!   is complete. It polls many records and produces asynchronously; nothing
//!   waits on a single send.
//! - An indexer commits a batch's offsets only after the batch is indexed (or
//!   its failures dead-lettered) and its events delivered.
//! - On a rebalance, offsets are committed for completed work only.
//! - Ids are message keys at every hop, so one id stays on one partition, read
//!   by one consumer, in order.
//!
//! The module, one file per concern: [`topics`] (names, client settings,
//! administration), [`delivery`] (what each produced message is accounted
//! against, and which offsets may move: the one internal API the roles share),
//! [`wire`] (dead letters, batched events, undecodable messages), and the roles:
//! [`worker`], [`indexer`], [`publisher`] (the runner) and [`hybrid`].

mod delivery;
mod hybrid;
mod indexer;
mod publisher;
mod topics;
mod wire;
mod worker;

pub use hybrid::HybridIndexerMessenger;
pub use indexer::KafkaIndexerMessenger;
pub use publisher::KafkaPublisherMessenger;
pub use topics::KafkaTopics;
pub use worker::KafkaWorkerMessenger;

use super::{MessengerError, MessengerFactory, MessengerParts};
use crate::config::KafkaConfig;

fn transport(e: impl std::fmt::Display) -> MessengerError {
    MessengerError::Transport(e.to_string())
}

/// The runner's messengers in Kafka mode: a publisher only; workers and
/// indexers are separate processes.
#[derive(Debug, Clone)]
pub struct KafkaMessengers {
    pub config: KafkaConfig,
}

impl MessengerFactory for KafkaMessengers {
    fn create(
        &self,
        pipeline: &str,
        _workers: usize,
        run_id: &str,
    ) -> Result<MessengerParts, MessengerError> {
        let topics = KafkaTopics::new(self.config.clone(), pipeline);
        Ok(MessengerParts {
            publisher: Box::new(KafkaPublisherMessenger::new(&topics, run_id)?),
            workers: Vec::new(),
            indexer: None,
        })
    }
}
