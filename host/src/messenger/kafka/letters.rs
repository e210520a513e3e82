//! Reading a pipeline's dead-letter topic back, for `weir replay`.

use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::wire::run_id_of;
use super::{KafkaTopics, transport};
use crate::core::failure::DeadLetter;
use crate::messenger::MessengerError;

/// Every dead letter on `pipeline`'s fail topic as it is now (up to the
/// end of each partition when this starts), oldest first per partition,
/// and how many messages were not documents (set aside: nothing to replay).
/// Reads without a consumer group: nothing is committed or changed.
pub fn read_fail_topic(
    topics: &KafkaTopics,
    pipeline: &str,
) -> Result<(Vec<DeadLetter>, usize), MessengerError> {
    let topic = topics.fail();
    let timeout = Duration::from_secs(10);
    let consumer: BaseConsumer = topics
        .consumer_config(&format!("weir-replay-{}", std::process::id()))
        .create()
        .map_err(transport)?;
    let metadata = consumer
        .fetch_metadata(Some(&topic), timeout)
        .map_err(transport)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    // Where each partition ends now: letters added later are not read.
    let mut ends = Vec::new();
    let mut assignment = TopicPartitionList::new();
    for &p in &partitions {
        let (low, high) = consumer
            .fetch_watermarks(&topic, p, timeout)
            .map_err(transport)?;
        if high > low {
            ends.push((p, high));
            assignment
                .add_partition_offset(&topic, p, Offset::Beginning)
                .map_err(transport)?;
        }
    }
    consumer.assign(&assignment).map_err(transport)?;
    let mut letters = Vec::new();
    let mut skipped = 0;
    let mut last_progress = Instant::now();
    while !ends.is_empty() {
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            if last_progress.elapsed() > Duration::from_secs(60) {
                return Err(MessengerError::Transport(format!(
                    "reading {topic} stalled before its end"
                )));
            }
            continue;
        };
        let message = message.map_err(transport)?;
        last_progress = Instant::now();
        let (partition, offset) = (message.partition(), message.offset());
        ends.retain(|&(p, end)| p != partition || offset + 1 < end);
        let header = |name: &str| {
            message
                .headers()
                .and_then(|h| h.iter().find(|h| h.key == name))
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        let document = message
            .payload()
            .and_then(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
            .filter(|d| d.get("id").is_some_and(serde_json::Value::is_string));
        let Some(document) = document else {
            skipped += 1;
            continue;
        };
        letters.push(DeadLetter {
            id: document["id"].as_str().unwrap_or_default().to_owned(),
            run_id: run_id_of(&message),
            pipeline: pipeline.to_owned(),
            plugin: header("weir.plugin").unwrap_or_default(),
            error: header("weir.error").unwrap_or_default(),
            attempts: header("weir.attempts")
                .and_then(|a| a.parse().ok())
                .unwrap_or(1),
            failed_at: header("weir.time_ms")
                .and_then(|ms| ms.parse::<u64>().ok())
                .map(|ms| {
                    let at = std::time::UNIX_EPOCH + Duration::from_millis(ms);
                    humantime::format_rfc3339_millis(at).to_string()
                })
                .unwrap_or_default(),
            document,
        });
    }
    Ok((letters, skipped))
}
