//! A run's journal, kept on its own event topic beside the events, so that
//! a run whose runner died can be resumed by another (`weir run --resume`,
//! a standby `weir serve`) and end with an exact summary.
//!
//! The runner writes, per connector of the run (numbered in the order the
//! run starts them):
//!
//! - `start`, before the connector publishes anything, and waited for: every
//!   event about its documents comes after it on the topic;
//! - `published`, the ids of its documents the source topic acknowledged,
//!   every [`EVERY`] while it publishes: an id journaled is in Kafka, and
//!   will be processed whether or not this runner lives;
//! - `done`, once its last document is acknowledged and every `published`
//!   entry before it is too.
//!
//! Journal writes are at least once: an entry the broker refused (an
//! outage outlasting the producer's patience, a partition briefly without
//! a leader) is sent again, never dropped, and `done` waits for all of
//! them. An entry sent again may be on the topic twice: each `published`
//! entry carries a name of its own (`batch`), and a replay counts each
//! name once.
//!
//! A resumed connector counts what the journal says was published as
//! published, applies the events of its part of the topic, and, unless it
//! was `done`, runs its connector again, skipping as many publications of
//! each id as were journaled. A document published but not yet journaled
//! when the runner died is published again: processed twice, its second
//! terminal event is a duplicate, counted apart.
//!
//! Journal messages carry the header `weir.journal`; event readers skip them.

use std::time::Duration;

use rdkafka::consumer::BaseConsumer;
use rdkafka::message::{BorrowedMessage, Header, Message, OwnedHeaders};
use serde::{Deserialize, Serialize};

use super::client::Quiet;
use super::transport;
use super::wire::events_from;
use crate::messenger::{MessengerError, Resumed};

/// The header that marks a journal message.
pub(super) const HEADER: &str = "weir.journal";

/// How often acknowledged ids are journaled while a connector publishes.
pub(super) const EVERY: Duration = Duration::from_millis(200);

/// One journal message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Entry {
    Start {
        connector: usize,
    },
    Published {
        connector: usize,
        ids: Vec<String>,
        /// Unique to this entry (its writer and number): the same entry
        /// read twice counts once. Absent in journals of older runners.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch: Option<String>,
    },
    Done {
        connector: usize,
    },
}

impl Entry {
    pub(super) fn headers() -> OwnedHeaders {
        OwnedHeaders::new().insert(Header {
            key: HEADER,
            value: Some("1"),
        })
    }

    pub(super) fn payload(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// `ids` as `published` entries of `connector`, each at most `max_bytes`
/// (their `batch` names left for the writer to give).
pub(super) fn published_entries(
    connector: usize,
    ids: Vec<String>,
    max_bytes: usize,
) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut chunk = Vec::new();
    let mut bytes = 64;
    for id in ids {
        // An id's JSON is at most six bytes per byte (\u escapes), and a comma.
        let size = id.len() * 6 + 3;
        if !chunk.is_empty() && bytes + size > max_bytes {
            entries.push(Entry::Published {
                connector,
                ids: std::mem::take(&mut chunk),
                batch: None,
            });
            bytes = 64;
        }
        bytes += size;
        chunk.push(id);
    }
    if !chunk.is_empty() {
        entries.push(Entry::Published {
            connector,
            ids: chunk,
            batch: None,
        });
    }
    entries
}

/// Whether `message` is a journal message.
pub(super) fn is_journal(message: &BorrowedMessage<'_>) -> bool {
    message
        .headers()
        .is_some_and(|h| rdkafka::message::Headers::iter(h).any(|h| h.key == HEADER))
}

/// What the journal on the event topic `topic` (read by `consumer`, assigned
/// at its first offset) says of connector `index`, read up to `end` (the
/// topic's end when the resume began); `None` when it never started. The
/// consumer is left at `end`, to read what comes next.
pub(super) fn replay(
    consumer: &BaseConsumer<Quiet>,
    topic: &str,
    end: i64,
    index: usize,
) -> Result<Option<Resumed>, MessengerError> {
    let mut started = false;
    let mut resumed = Resumed::default();
    // Entries sent more than once (at least once) count once.
    let mut batches = std::collections::HashSet::new();
    // Events of the connector's part of the topic: from its `start` to the
    // next connector's.
    let mut in_part = false;
    let mut position = -1_i64;
    let mut idle = 0;
    while position + 1 < end {
        let Some(polled) = consumer.poll(Duration::from_millis(500)) else {
            idle += 1;
            if idle >= 60 {
                return Err(transport(format!(
                    "cannot read the run's journal on {topic}: nothing came for 30 s at offset {}",
                    position + 1
                )));
            }
            continue;
        };
        idle = 0;
        let message = polled.map_err(transport)?;
        position = message.offset();
        let payload = message.payload().unwrap_or_default();
        if is_journal(&message) {
            match serde_json::from_slice::<Entry>(payload) {
                Ok(Entry::Start { connector }) => {
                    in_part = connector == index;
                    started |= in_part;
                }
                Ok(Entry::Published {
                    connector,
                    ids,
                    batch,
                }) if connector == index => {
                    if batch.is_none_or(|b| batches.insert(b)) {
                        resumed.published.extend(ids);
                    }
                }
                Ok(Entry::Done { connector }) if connector == index => resumed.done = true,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(topic, offset = position, error = %e, "a journal message is not one; skipped")
                }
            }
        } else if in_part {
            match events_from(payload) {
                Ok(events) => resumed.events.extend(events),
                Err(e) => {
                    tracing::warn!(topic, offset = position, error = %e, "a message on the event topic is not events; skipped")
                }
            }
        }
    }
    // The consumer is at `end` now: what follows is read live.
    Ok(started.then_some(resumed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back() {
        for entry in [
            Entry::Start { connector: 0 },
            Entry::Published {
                connector: 1,
                ids: vec!["a".into(), "\"b\"".into()],
                batch: Some("w:1".into()),
            },
            Entry::Published {
                connector: 1,
                ids: vec!["a".into()],
                batch: None,
            },
            Entry::Done { connector: 2 },
        ] {
            let back: Entry = serde_json::from_slice(&entry.payload()).expect("reads back");
            assert_eq!(back, entry);
        }
    }

    #[test]
    fn an_older_runners_entries_read_back_without_a_batch_name() {
        let old: Entry =
            serde_json::from_slice(br#"{"published":{"connector":0,"ids":["a"]}}"#).expect("reads");
        assert_eq!(
            old,
            Entry::Published {
                connector: 0,
                ids: vec!["a".into()],
                batch: None
            }
        );
    }

    #[test]
    fn published_ids_are_split_to_fit_and_kept_in_order() {
        let ids: Vec<String> = (0..1000).map(|i| format!("doc-{i}\u{1}")).collect();
        let entries = published_entries(3, ids.clone(), 4096);
        assert!(entries.len() > 1);
        let mut back = Vec::new();
        for entry in entries {
            assert!(entry.payload().len() <= 4096, "{}", entry.payload().len());
            let Entry::Published {
                connector: 3, ids, ..
            } = entry
            else {
                panic!("{entry:?}");
            };
            back.extend(ids);
        }
        assert_eq!(back, ids);
        // One id larger than the limit still goes, alone.
        let big = vec!["x".repeat(10_000)];
        assert_eq!(published_entries(0, big, 4096).len(), 1);
        assert!(published_entries(0, Vec::new(), 4096).is_empty());
    }
}
