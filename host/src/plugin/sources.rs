//! The sources that never end a streaming connector may receive from (the
//! `messages` interface, `wit/messages.wit`), as its config grants them:
//! `grants.kafka` (topics), `grants.queues` and `grants.push`. The plugin
//! names a grant; the host holds the client.
//!
//! A new kind of source is a field of [`super::Grants`], a case of
//! [`SourceGrant`] and one line in [`super::Grants::sources`]; its backend
//! is opened by the run's registry (`source::open`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `grants.kafka.<name>`: topics a connector consumes as one consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaGrant {
    /// The cluster's bootstrap servers, `host:port[,host:port...]`.
    pub brokers: String,
    /// The topics read, all of their partitions.
    pub topics: Vec<String>,
    /// The consumer group: the partitions are shared among every consumer
    /// of the group, and its committed offsets are where a run starts.
    pub group: String,
    /// Where a group with no committed offset starts: `earliest` (default)
    /// or `latest`.
    #[serde(default)]
    pub start: KafkaStart,
    /// More librdkafka consumer properties (`security.protocol`,
    /// `sasl.username`, ...). The host's own (`group.id`,
    /// `enable.auto.commit`, `bootstrap.servers`, ...) cannot be replaced.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// Where a consumer group with no committed offset starts reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KafkaStart {
    #[default]
    Earliest,
    Latest,
}

/// `grants.push.<name>`: documents a tenant pushes to its run under
/// `weir serve` (`POST /api/runs/{id}/documents`, JSON lines), each line a
/// message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PushGrant {
    /// Lines held at once: pushed and not yet published by the connector.
    /// A push that would go past it is answered 429 (try again). Default
    /// 10,000; under `weir serve` at most the tenant's `push.max_buffer`.
    #[serde(default = "PushGrant::default_buffer")]
    pub buffer: usize,
}

impl PushGrant {
    pub const DEFAULT_BUFFER: usize = 10_000;
    /// The most `buffer` may be.
    pub const MAX_BUFFER: usize = 1_000_000;

    fn default_buffer() -> usize {
        Self::DEFAULT_BUFFER
    }
}

/// One granted source, by kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SourceGrant<'a> {
    Kafka(&'a KafkaGrant),
    Queue(&'a super::QueueGrant),
    Push(&'a PushGrant),
}

impl SourceGrant<'_> {
    /// The grant's table, for messages: `grants.kafka`.
    pub fn table(&self) -> &'static str {
        match self {
            Self::Kafka(_) => "grants.kafka",
            Self::Queue(_) => "grants.queues",
            Self::Push(_) => "grants.push",
        }
    }
}

impl super::Grants {
    /// Every granted source, by the name the plugin uses, each kind in turn
    /// (a name given twice is a config problem, `config/check`).
    pub fn sources(&self) -> Vec<(&str, SourceGrant<'_>)> {
        let mut out = Vec::new();
        out.extend(
            self.kafka
                .iter()
                .map(|(name, grant)| (name.as_str(), SourceGrant::Kafka(grant))),
        );
        out.extend(
            self.queues
                .iter()
                .map(|(name, grant)| (name.as_str(), SourceGrant::Queue(grant))),
        );
        out.extend(
            self.push
                .iter()
                .map(|(name, grant)| (name.as_str(), SourceGrant::Push(grant))),
        );
        out
    }
}
