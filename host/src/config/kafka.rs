//! `[kafka]`: how Kafka mode reaches the cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[kafka]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// Brokers, `host:port[,host:port...]`. Default `127.0.0.1:9092`.
    #[serde(default = "KafkaConfig::default_bootstrap_servers")]
    pub bootstrap_servers: String,
    /// Consumer group of workers. Default `weir-<pipeline>-workers`.
    #[serde(default)]
    pub worker_group_id: Option<String>,
    /// Consumer group of indexers. Default `weir-<pipeline>-indexers`.
    #[serde(default)]
    pub indexer_group_id: Option<String>,
    /// Longest a consumer may go between polls before the group drops it
    /// (`max.poll.interval.ms`); longer than any document takes. Default 10 min.
    #[serde(
        default = "KafkaConfig::default_max_poll_interval",
        with = "humantime_serde"
    )]
    pub max_poll_interval: Duration,
    /// Largest message produced or fetched, in bytes. Default 10 MiB.
    #[serde(default = "KafkaConfig::default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// The source topic instead of `<pipeline>_source` (letters, digits, `.`, `_`, `-`).
    #[serde(default)]
    pub source_topic: Option<String>,
    /// One fixed event topic instead of `<pipeline>_event_<run id>`: for
    /// streaming only (no runner counting events), never with `weir run`.
    #[serde(default)]
    pub event_topic: Option<String>,
    /// Partitions of the source, destination and fail topics that Weir
    /// creates when they are missing. Unset: Weir creates none of them (the
    /// broker may auto-create them with its default partition count).
    #[serde(default)]
    pub topic_partitions: Option<u32>,
    /// Replicas of each topic Weir creates. Unset: the broker's
    /// `default.replication.factor`.
    #[serde(default)]
    pub replication_factor: Option<u16>,
    /// Whether workers and indexers send lifecycle events. Default true.
    #[serde(default = "KafkaConfig::default_events")]
    pub events: bool,
    /// Deliveries of a source record whose worker never finished it (the
    /// process died on it: an abort, an out-of-memory kill) before the next
    /// worker quarantines it to `<pipeline>_fail` unprocessed. 0: never.
    /// Default 3.
    #[serde(default = "KafkaConfig::default_max_deliveries")]
    pub max_deliveries: u32,
    /// Topic settings for the topics Weir creates (e.g. `retention.ms`,
    /// `max.message.bytes`).
    #[serde(default)]
    pub topic_config: BTreeMap<String, String>,
    /// How often `weir worker`, `weir indexer` and `weir hybrid`
    /// announce themselves on `<pipeline>_heartbeat`, for runners to see who
    /// serves a pipeline. Default 2 s.
    #[serde(
        default = "KafkaConfig::default_heartbeat_interval",
        with = "humantime_serde"
    )]
    pub heartbeat_interval: Duration,
    /// Whether `weir run` deletes its event topics when the run ends. Default true.
    #[serde(default = "KafkaConfig::default_events")]
    pub delete_event_topics: bool,
    /// Put before the pipeline's name in every topic and consumer group
    /// name (`<prefix><pipeline>_source`, ...). `weir serve` sets it for
    /// the runs it sends to its fleet, so that tenants' topics cannot meet.
    #[serde(default)]
    pub topic_prefix: Option<String>,
    /// Put before the pipeline's name in its connector-state topic instead
    /// of `topic_prefix`. `weir serve` gives a tenant's fleet runs one that
    /// outlives their specs, so that incremental sync goes on after a spec
    /// is retired.
    #[serde(default)]
    pub state_prefix: Option<String>,
    /// librdkafka properties for every client (e.g. `security.protocol`, `sasl.*`, `ssl.*`).
    #[serde(default)]
    pub client: BTreeMap<String, String>,
    /// librdkafka properties for producers only.
    #[serde(default)]
    pub producer: BTreeMap<String, String>,
    /// librdkafka properties for consumers only.
    #[serde(default)]
    pub consumer: BTreeMap<String, String>,
    /// librdkafka properties for the admin client only.
    #[serde(default)]
    pub admin: BTreeMap<String, String>,
}

impl KafkaConfig {
    fn default_bootstrap_servers() -> String {
        "127.0.0.1:9092".into()
    }
    fn default_max_poll_interval() -> Duration {
        Duration::from_secs(600)
    }
    fn default_max_message_bytes() -> usize {
        10 << 20
    }
    fn default_events() -> bool {
        true
    }
    fn default_heartbeat_interval() -> Duration {
        Duration::from_secs(2)
    }
    fn default_max_deliveries() -> u32 {
        3
    }

    /// Settings with defaults for `bootstrap_servers`.
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            worker_group_id: None,
            indexer_group_id: None,
            max_poll_interval: Self::default_max_poll_interval(),
            max_message_bytes: Self::default_max_message_bytes(),
            source_topic: None,
            event_topic: None,
            topic_partitions: None,
            replication_factor: None,
            events: Self::default_events(),
            topic_config: BTreeMap::new(),
            heartbeat_interval: Self::default_heartbeat_interval(),
            max_deliveries: Self::default_max_deliveries(),
            delete_event_topics: Self::default_events(),
            topic_prefix: None,
            state_prefix: None,
            client: BTreeMap::new(),
            producer: BTreeMap::new(),
            consumer: BTreeMap::new(),
            admin: BTreeMap::new(),
        }
    }
}
