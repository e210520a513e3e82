//! Reading a pipeline's dead-letter topic back: all of it for `weir
//! replay`, or one run's letters as they come for `weir serve`'s fleet runs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client::{Quiet, polled};
use super::wire::run_id_of;
use super::{KafkaTopics, transport};
use crate::core::failure::DeadLetter;
use crate::messenger::MessengerError;

/// How long a read toward a partition's end may go without a message.
const STALLED: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(10);

/// Every dead letter on `pipeline`'s fail topic as it is now (up to the
/// end of each partition when this starts), oldest first per partition,
/// and how many messages were not documents (set aside: nothing to replay).
/// Reads without a consumer group: nothing is committed or changed.
pub fn read_fail_topic(
    topics: &KafkaTopics,
    pipeline: &str,
) -> Result<(Vec<DeadLetter>, usize), MessengerError> {
    let reader = Reader::new(topics)?;
    let mut ends = reader.ends()?;
    let mut letters = Vec::new();
    let mut skipped = 0;
    let mut last_progress = Instant::now();
    while !ends.is_empty() {
        let Some(message) = reader.consumer.poll(Duration::from_millis(200)) else {
            if last_progress.elapsed() > STALLED {
                return Err(reader.stalled());
            }
            continue;
        };
        let message = message.map_err(transport)?;
        last_progress = Instant::now();
        passed(&mut ends, &message);
        match letter_of(&message, pipeline) {
            Some(letter) => letters.push(letter),
            None => skipped += 1,
        }
    }
    Ok((letters, skipped))
}

/// Hand `each` the dead letters of `run_id` on `pipeline`'s fail topic,
/// from the topic's start and then as they come, until `finished` is set;
/// then read on to where each partition ends at that moment, and return.
/// A fleet run's letters are written by fleet workers on other machines:
/// this is how its control plane keeps them (creating the topic if the run
/// has not yet).
///
/// An outage does not end it: transient errors are waited out, and when
/// the reader itself fails (the cluster gone, a partition without a
/// leader) it starts again, with a growing pause, from where it was, so
/// each letter is handed over once. Once `finished` is set it tries for
/// [`STALLED`] more at most, then says why it could not read to the end.
pub fn follow_run_letters(
    topics: &KafkaTopics,
    pipeline: &str,
    run_id: &str,
    finished: &AtomicBool,
    mut each: impl FnMut(DeadLetter),
) -> Result<(), MessengerError> {
    // Per partition, the next offset to read: where a new reader starts.
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let mut pause = Duration::from_millis(100);
    let mut give_up_at: Option<Instant> = None;
    loop {
        let followed = follow_from(topics, pipeline, run_id, finished, &mut next, &mut each);
        let Err(e) = followed else {
            return Ok(());
        };
        if finished.load(Ordering::Relaxed) {
            let give_up = *give_up_at.get_or_insert_with(|| Instant::now() + STALLED);
            if Instant::now() >= give_up {
                return Err(e);
            }
        }
        tracing::warn!(pipeline, error = %e, retry_in = ?pause,
            "reading the run's dead letters failed; reading on from where it was");
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// [`follow_run_letters`] with one reader, from `next` (kept up to date).
fn follow_from(
    topics: &KafkaTopics,
    pipeline: &str,
    run_id: &str,
    finished: &AtomicBool,
    next: &mut BTreeMap<i32, i64>,
    each: &mut impl FnMut(DeadLetter),
) -> Result<(), MessengerError> {
    topics.ensure_pipeline_topics()?;
    let reader = Reader::from(topics, next)?;
    if reader.partitions.is_empty() {
        // Made a moment ago, or the cluster answered without it.
        return Err(transport(format!(
            "{} has no partitions known yet",
            reader.topic
        )));
    }
    let mut ends: Option<Vec<(i32, i64)>> = None;
    let mut last_progress = Instant::now();
    loop {
        if ends.is_none() && finished.load(Ordering::Relaxed) {
            ends = Some(reader.ends()?);
            last_progress = Instant::now();
        }
        if ends.as_ref().is_some_and(Vec::is_empty) {
            return Ok(());
        }
        let Some(message) = reader.consumer.poll(Duration::from_millis(200)) else {
            if ends.is_some() && last_progress.elapsed() > STALLED {
                return Err(reader.stalled());
            }
            continue;
        };
        // An outage is waited out (and logged once); a fatal error ends
        // this reader.
        let Some(message) = polled(message)? else {
            continue;
        };
        last_progress = Instant::now();
        next.insert(message.partition(), message.offset() + 1);
        if let Some(ends) = &mut ends {
            passed(ends, &message);
        }
        if run_id_of(&message).as_deref() == Some(run_id)
            && let Some(letter) = letter_of(&message, pipeline)
        {
            each(letter);
        }
    }
}

/// A consumer of the whole fail topic from its start, in no group: it
/// commits nothing and changes nothing.
struct Reader {
    consumer: BaseConsumer<Quiet>,
    /// Asks where partitions end. Not `consumer`: a broker answers one
    /// connection's requests in order, so each question would wait behind
    /// the consumer's fetch (up to `fetch.wait.max.ms`, 500 ms) in flight.
    watermarks: BaseConsumer<Quiet>,
    topic: String,
    partitions: Vec<i32>,
}

impl Reader {
    fn new(topics: &KafkaTopics) -> Result<Self, MessengerError> {
        Self::from(topics, &BTreeMap::new())
    }

    /// A reader of every partition from its start, or from `next` where it
    /// names the partition.
    fn from(topics: &KafkaTopics, next: &BTreeMap<i32, i64>) -> Result<Self, MessengerError> {
        let topic = topics.fail();
        let client = || -> Result<BaseConsumer<Quiet>, MessengerError> {
            topics
                .consumer_config(&format!("weir-letters-{}", std::process::id()))
                .create_with_context(Quiet)
                .map_err(transport)
        };
        let (consumer, watermarks) = (client()?, client()?);
        let metadata = consumer
            .fetch_metadata(Some(&topic), TIMEOUT)
            .map_err(transport)?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        let mut assignment = TopicPartitionList::new();
        for &p in &partitions {
            let offset = next
                .get(&p)
                .map_or(Offset::Beginning, |&o| Offset::Offset(o));
            assignment
                .add_partition_offset(&topic, p, offset)
                .map_err(transport)?;
        }
        consumer.assign(&assignment).map_err(transport)?;
        Ok(Self {
            consumer,
            watermarks,
            topic,
            partitions,
        })
    }

    /// Where each partition that has messages ends now: letters added
    /// later are not waited for.
    fn ends(&self) -> Result<Vec<(i32, i64)>, MessengerError> {
        let mut ends = Vec::new();
        for &p in &self.partitions {
            let (low, high) = self
                .watermarks
                .fetch_watermarks(&self.topic, p, TIMEOUT)
                .map_err(transport)?;
            if high > low {
                ends.push((p, high));
            }
        }
        // Partitions already read to their end are done.
        let positions = self.consumer.position().map_err(transport)?;
        ends.retain(|&(p, end)| {
            !matches!(positions.find_partition(&self.topic, p).map(|e| e.offset()),
                Some(Offset::Offset(at)) if at >= end)
        });
        Ok(ends)
    }

    fn stalled(&self) -> MessengerError {
        MessengerError::Transport(format!("reading {} stalled before its end", self.topic))
    }
}

/// Strike off a partition once `message` is its last before its end.
fn passed(ends: &mut Vec<(i32, i64)>, message: &BorrowedMessage<'_>) {
    let (partition, offset) = (message.partition(), message.offset());
    ends.retain(|&(p, end)| p != partition || offset + 1 < end);
}

/// The dead letter `message` is, with its headers saying why; none when
/// its payload is not a document.
fn letter_of(message: &BorrowedMessage<'_>, pipeline: &str) -> Option<DeadLetter> {
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
        .filter(|d| d.get("id").is_some_and(serde_json::Value::is_string))?;
    Some(DeadLetter {
        id: document["id"].as_str().unwrap_or_default().to_owned(),
        run_id: run_id_of(message),
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
    })
}
