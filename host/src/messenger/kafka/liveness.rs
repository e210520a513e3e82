//! Heartbeats: who serves a pipeline. `weir worker`, `weir indexer` and
//! `weir hybrid` announce themselves on `<pipeline>_heartbeat` (one
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
use crate::messenger::{Heartbeat, MessengerError, Seen, ServerRole, Servers};

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

/// How often a runner sends an echo through its pipeline's heartbeat
/// topic, and how recently the latest echo that came back must have been
/// sent for the cluster to count as reachable.
const ECHO_EVERY: Duration = Duration::from_secs(1);
const ECHO_FRESH: Duration = Duration::from_secs(5);
/// Echoes sent and not yet back that are remembered.
const ECHOES_KEPT: usize = 64;
/// A process not heard from this long is forgotten: the processes a long
/// run has seen are those of the last hour, not all it ever saw.
const FORGET_AFTER: Duration = Duration::from_secs(60 * 60);

/// A runner's echo: a message only its sender reads back. It is not a
/// heartbeat (other readers skip what is not one).
#[derive(serde::Serialize, serde::Deserialize)]
struct Echo {
    echo: String,
    seq: u64,
}

/// A runner's view of the heartbeats of its pipeline, and of whether it
/// reaches the cluster they come through: it sends itself an echo on the
/// heartbeat topic every [`ECHO_EVERY`], and the cluster counts as
/// reachable while an echo sent in the last [`ECHO_FRESH`] has come back.
/// Every heartbeat sent before such an echo has been read: a process that
/// is silent then is silent, not cut off by an outage.
pub(super) struct HeartbeatReader {
    consumer: BaseConsumer<Quiet>,
    latest: Mutex<HashMap<String, Seen>>,
    echo: ThreadedProducer<Quiet>,
    topic: String,
    /// Names this reader's echoes: `<host>:<pid>:<ms>:<random>`.
    token: String,
    echoes: Mutex<Echoes>,
}

#[derive(Default)]
struct Echoes {
    next: u64,
    /// Echoes in flight: number and when sent.
    sent: std::collections::VecDeque<(u64, Instant)>,
    last_sent: Option<Instant>,
    /// When the newest echo that came back was sent.
    back: Option<Instant>,
    /// Since when the cluster has been reachable without a break.
    since: Option<Instant>,
}

impl HeartbeatReader {
    /// Read `<pipeline>_heartbeat` from [`LOOK_BACK`] ago on.
    pub(super) fn new(topics: &KafkaTopics, group: &str) -> Result<Self, MessengerError> {
        let consumer: BaseConsumer<Quiet> = topics
            .consumer_config(group)
            .create_with_context(Quiet)
            .map_err(transport)?;
        let echo: ThreadedProducer<Quiet> = topics
            .client(&topics.config.producer)
            .set("linger.ms", "0")
            // An echo older than this says nothing any more: dropped.
            .set("message.timeout.ms", ECHO_FRESH.as_millis().to_string())
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
            echo,
            token: format!(
                "runner:{}:{}:{}:{:08x}",
                hostname(),
                std::process::id(),
                millis_now(),
                fastrand::u32(..)
            ),
            topic,
            echoes: Mutex::default(),
        })
    }

    /// Take in what arrived: the latest heartbeat of each process, and
    /// whether the cluster is reachable (see [`Servers`]). Meant to be
    /// asked about once a second: each call may send an echo.
    pub(super) fn servers(&self) -> Servers {
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let mut echoes = self.echoes.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(Ok(message)) = self.consumer.poll(Duration::ZERO) {
            let Some(payload) = message.payload() else {
                continue;
            };
            let now = Instant::now();
            if let Ok(heartbeat) = serde_json::from_slice::<Heartbeat>(payload) {
                let seen = Seen {
                    heartbeat,
                    received: now,
                };
                latest.insert(seen.heartbeat.process.clone(), seen);
            } else if let Ok(echo) = serde_json::from_slice::<Echo>(payload)
                && echo.echo == self.token
            {
                echoes.came_back(echo.seq);
            }
        }
        let now = Instant::now();
        // A run that never ends sees processes come and go (restarted
        // workers): those silent this long are gone, and forgotten.
        latest.retain(|_, seen| now.saturating_duration_since(seen.received) < FORGET_AFTER);
        if echoes.last_sent.is_none_or(|t| now - t >= ECHO_EVERY) {
            let seq = echoes.next;
            echoes.next += 1;
            echoes.last_sent = Some(now);
            let payload = serde_json::to_vec(&Echo {
                echo: self.token.clone(),
                seq,
            })
            .unwrap_or_default();
            let record = BaseRecord::<str, [u8]>::to(&self.topic)
                .key(self.token.as_str())
                .payload(&payload);
            match self.echo.send(record) {
                Ok(()) => {
                    if echoes.sent.len() == ECHOES_KEPT {
                        echoes.sent.pop_front();
                    }
                    echoes.sent.push_back((seq, now));
                }
                Err((e, _)) => tracing::debug!(error = %e, "echo not sent"),
            }
        }
        if echoes
            .back
            .is_none_or(|sent| now.saturating_duration_since(sent) > ECHO_FRESH)
        {
            echoes.since = None;
            return Servers::Unreachable;
        }
        let since = *echoes.since.get_or_insert(now);
        Servers::Heard {
            since,
            seen: latest.values().cloned().collect(),
        }
    }
}

impl Echoes {
    /// Echo `seq` came back.
    fn came_back(&mut self, seq: u64) {
        while let Some(&(first, sent)) = self.sent.front() {
            if first > seq {
                break;
            }
            self.sent.pop_front();
            if first == seq {
                self.back = Some(self.back.map_or(sent, |b| b.max(sent)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_counts_by_when_it_was_sent() {
        let start = Instant::now();
        let mut echoes = Echoes::default();
        for seq in 0..3 {
            echoes
                .sent
                .push_back((seq, start + Duration::from_secs(seq)));
        }
        // Echo 1 came back (0 was lost): fresh as of when 1 was sent.
        echoes.came_back(1);
        assert_eq!(echoes.back, Some(start + Duration::from_secs(1)));
        assert_eq!(echoes.sent.len(), 1, "0 and 1 are done with");
        // A stranger's number, or one already back, changes nothing.
        echoes.came_back(1);
        assert_eq!(echoes.back, Some(start + Duration::from_secs(1)));
        echoes.came_back(2);
        assert_eq!(echoes.back, Some(start + Duration::from_secs(2)));
        assert!(echoes.sent.is_empty());
    }
}
