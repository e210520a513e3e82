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
//! administration), [`client`] (outages, librdkafka's errors and logs),
//! [`delivery`] (what each produced message is accounted against, and which
//! offsets may move: the one internal API the roles share), [`wire`] (dead
//! letters, batched events, undecodable messages), [`revocations`] and
//! [`output`] (what a Hybrid pair's worker and indexer share),
//! [`delivery_count`] and [`solo`] (poison pills), [`liveness`]
//! (heartbeats), [`letters`] (reading dead letters back), [`state`]
//! (connectors' state on a compacted topic), [`journal`] (what a resumed
//! run reads of the runner that died), and the roles, one
//! file per messenger: [`worker`] (with its [`worker_rebalance`]),
//! [`indexer`], [`publisher`] (the runner) and [`hybrid`].

mod client;
mod delivery;
mod delivery_count;
mod fence;
mod hybrid;
mod indexer;
mod journal;
mod letters;
mod liveness;
mod output;
mod publisher;
mod revocations;
mod solo;
mod state;
pub mod table;
mod topics;
mod wire;
mod worker;
mod worker_rebalance;

pub use hybrid::HybridIndexerMessenger;
pub use indexer::KafkaIndexerMessenger;
pub use letters::{follow_run_letters, read_fail_topic};
pub use liveness::HeartbeatSender;
pub use publisher::KafkaPublisherMessenger;
pub use state::KafkaStates;
pub use topics::KafkaTopics;
pub use worker::KafkaWorkerMessenger;

use super::{MessengerError, MessengerFactory, MessengerParts};
use crate::config::KafkaConfig;

/// How often a busy worker or indexer commits its progress: often enough
/// that a crash redelivers little, seldom enough to cost the broker little.
const COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

fn transport(e: impl std::fmt::Display) -> MessengerError {
    MessengerError::Transport(e.to_string())
}

/// `query` about a topic, asked again for up to 30 s while the cluster does
/// not know the topic yet (it was created a moment ago).
fn settled<T>(
    mut query: impl FnMut() -> rdkafka::error::KafkaResult<T>,
) -> Result<T, MessengerError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match query() {
            Ok(answer) => return Ok(answer),
            Err(e) if std::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "topic not known yet; asking again");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(transport(e)),
        }
    }
}

/// The runner's messengers in Kafka mode: a publisher only; workers and
/// indexers are separate processes.
#[derive(Debug)]
pub struct KafkaMessengers {
    config: KafkaConfig,
    /// Pipelines with an event topic per run, to delete when the run ends.
    pipelines: std::sync::Mutex<Vec<String>>,
    /// Connectors started so far: each one's number in the run's journal.
    connectors: std::sync::atomic::AtomicUsize,
    /// Whether the run resumes one an earlier runner started.
    resume: bool,
}

impl KafkaMessengers {
    pub fn new(config: KafkaConfig) -> Self {
        Self {
            config,
            pipelines: std::sync::Mutex::default(),
            connectors: std::sync::atomic::AtomicUsize::new(0),
            resume: false,
        }
    }

    /// Messengers that resume a run an earlier runner started: each
    /// connector first reads what the run's journal says of it.
    pub fn resuming(config: KafkaConfig) -> Self {
        Self {
            resume: true,
            ..Self::new(config)
        }
    }
}

impl MessengerFactory for KafkaMessengers {
    fn create(
        &self,
        pipeline: &str,
        _workers: usize,
        _indexers: usize,
        run_id: &str,
    ) -> Result<MessengerParts, MessengerError> {
        let mut topics = KafkaTopics::new(self.config.clone(), pipeline);
        topics.read_broker_limit(|| false);
        let connector = self
            .connectors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let publisher = KafkaPublisherMessenger::new(&topics, run_id, connector, self.resume)?;
        let mut pipelines = self
            .pipelines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !pipelines.iter().any(|p| p == pipeline) {
            pipelines.push(pipeline.to_owned());
        }
        Ok(MessengerParts {
            publisher: Box::new(publisher),
            workers: Vec::new(),
            indexers: Vec::new(),
        })
    }

    fn workers_are_remote(&self) -> bool {
        true
    }

    fn keeps_dead_letters(&self) -> bool {
        true
    }

    fn dead_letters_in(&self, pipeline: &str) -> Option<String> {
        Some(KafkaTopics::new(self.config.clone(), pipeline).fail())
    }

    /// Delete the run's event topics (unless `kafka.delete_event_topics` is
    /// off, or events go to one fixed topic). Events that arrive later (a
    /// redelivered document's) have no reader; their producers log and drop them.
    fn run_ended(&self, run_id: &str) {
        self.connectors
            .store(0, std::sync::atomic::Ordering::Relaxed);
        if !self.config.delete_event_topics || self.config.event_topic.is_some() {
            return;
        }
        let pipelines = std::mem::take(
            &mut *self
                .pipelines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let Some(first) = pipelines.first() else {
            return;
        };
        let topics = KafkaTopics::new(self.config.clone(), first);
        let names: Vec<String> = pipelines
            .iter()
            .filter_map(|p| KafkaTopics::new(self.config.clone(), p).events(Some(run_id)))
            .collect();
        topics.delete_topics(&names);
    }
}
