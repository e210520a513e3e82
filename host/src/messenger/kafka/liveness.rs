//! Heartbeats: who serves a pipeline. `weir worker`, `weir indexer` and
//! `weir worker-indexer` announce themselves on `<pipeline>_heartbeat` (one
//! partition, an hour of history) every `kafka.heartbeat_interval`, and once
//! more as they stop; a runner reads the recent ones to tell whether anyone
//! serves its pipeline.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use foldhash::HashMap;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client::Quiet;
use super::wire::millis_now;
use super::{KafkaTopics, settled, transport};
use crate::messenger::{Heartbeat, MessengerError, Seen, ServerRole};

/// How far back a runner looks for heartbeats when it starts.
const LOOK_BACK: Duration = Duration::from_secs(120);

/// Sends a serving process's heartbeats until dropped; then a last one
/// saying it stopped.
pub struct HeartbeatSender {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for HeartbeatSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeartbeatSender").finish_non_exhaustive()
    }
}

impl HeartbeatSender {
    /// Start announcing a `role` process; `counts` tells its documents
    /// processed and indexed so far.
    pub fn start(
        topics: &KafkaTopics,
        role: ServerRole,
        counts: impl Fn() -> (u64, u64) + Send + 'static,
    ) -> Result<Self, MessengerError> {
        let producer: ThreadedProducer<Quiet> = topics
            .client(&topics.config.producer)
            .set("linger.ms", "0")
            .create_with_context(Quiet)
            .map_err(transport)?;
        let topic = topics.heartbeats();
        let interval = topics.config.heartbeat_interval;
        let process = format!("{}:{}:{}", hostname(), std::process::id(), millis_now());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("weir-heartbeat".into())
            .spawn(move || {
                let beat = |serving: bool| {
                    let (processed, indexed) = counts();
                    let heartbeat = Heartbeat {
                        process: process.clone(),
                        role,
                        serving,
                        time_ms: millis_now(),
                        processed,
                        indexed,
                    };
                    let payload = serde_json::to_vec(&heartbeat).unwrap_or_default();
                    let record = BaseRecord::<str, [u8]>::to(&topic)
                        .key(process.as_str())
                        .payload(&payload);
                    if let Err((e, _)) = producer.send(record) {
                        tracing::debug!(error = %e, "heartbeat not sent");
                    }
                };
                let mut next = Instant::now();
                while !stopping.load(Ordering::Relaxed) {
                    if Instant::now() >= next {
                        beat(true);
                        next = Instant::now() + interval;
                    }
                    std::thread::sleep(Duration::from_millis(50).min(interval));
                }
                beat(false);
                let _ = producer.flush(Duration::from_secs(5));
            })
            .map_err(transport)?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for HeartbeatSender {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into())
}

/// A runner's view of the heartbeats of its pipeline.
pub(super) struct HeartbeatReader {
    consumer: BaseConsumer<Quiet>,
    latest: Mutex<HashMap<String, Seen>>,
}

impl HeartbeatReader {
    /// Read `<pipeline>_heartbeat` from [`LOOK_BACK`] ago on.
    pub(super) fn new(topics: &KafkaTopics, group: &str) -> Result<Self, MessengerError> {
        let consumer: BaseConsumer<Quiet> = topics
            .consumer_config(group)
            .create_with_context(Quiet)
            .map_err(transport)?;
        let topic = topics.heartbeats();
        let since = millis_now() - i64::try_from(LOOK_BACK.as_millis()).unwrap_or(i64::MAX);
        let mut wanted = TopicPartitionList::new();
        wanted
            .add_partition_offset(&topic, 0, Offset::Offset(since))
            .map_err(transport)?;
        let start =
            settled(|| consumer.offsets_for_times(wanted.clone(), Duration::from_secs(10)))?;
        let mut tpl = TopicPartitionList::new();
        for e in start.elements() {
            // No heartbeat that recent: start at the end.
            let offset = match e.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                _ => Offset::End,
            };
            tpl.add_partition_offset(&topic, 0, offset)
                .map_err(transport)?;
        }
        consumer.assign(&tpl).map_err(transport)?;
        Ok(Self {
            consumer,
            latest: Mutex::default(),
        })
    }

    /// Take in what arrived; the latest heartbeat of each process.
    pub(super) fn servers(&self) -> Vec<Seen> {
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(Ok(message)) = self.consumer.poll(Duration::ZERO) {
            if let Some(heartbeat) = message
                .payload()
                .and_then(|p| serde_json::from_slice::<Heartbeat>(p).ok())
            {
                let seen = Seen {
                    heartbeat,
                    received: Instant::now(),
                };
                latest.insert(seen.heartbeat.process.clone(), seen);
            }
        }
        latest.values().cloned().collect()
    }
}
