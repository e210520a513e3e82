//! `[kafka]`: topic names Kafka accepts, at least one broker, sizes and
//! intervals that can work.

use super::Found;
use crate::config::{KafkaConfig, Problem};

/// Whether Kafka takes `topic` as a topic name (as Weir writes them).
fn safe_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

pub(super) fn check(kafka: &KafkaConfig, found: &mut Found) {
    for (key, topic) in [
        ("kafka.source_topic", &kafka.source_topic),
        ("kafka.event_topic", &kafka.event_topic),
    ] {
        if let Some(topic) = topic
            && !safe_topic(topic)
        {
            found.push(Problem::new(
                key,
                format!("`{topic}` may only hold letters, digits, `.`, `_` and `-`"),
            ));
        }
    }
    if kafka.bootstrap_servers.trim().is_empty() {
        found.push(Problem::new(
            "kafka.bootstrap_servers",
            "must name at least one broker",
        ));
    }
    if kafka.topic_partitions == Some(0) {
        found.push(Problem::new("kafka.topic_partitions", "must be at least 1"));
    }
    if kafka.replication_factor == Some(0) {
        found.push(Problem::new(
            "kafka.replication_factor",
            "must be at least 1 (unset: the broker's default)",
        ));
    }
    if kafka.max_message_bytes < 1024 {
        found.push(Problem::new(
            "kafka.max_message_bytes",
            "must be at least 1024",
        ));
    }
}
