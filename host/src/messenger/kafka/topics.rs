//! Topic names, client settings and topic administration for one pipeline.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;

use super::transport;
use crate::config::KafkaConfig;
use crate::document::Document;
use crate::messenger::MessengerError;

/// Topic names and client settings for one pipeline.
#[derive(Debug, Clone)]
pub struct KafkaTopics {
    pub(super) config: KafkaConfig,
    pub(super) pipeline: String,
}

impl KafkaTopics {
    pub fn new(config: KafkaConfig, pipeline: &str) -> Self {
        Self {
            config,
            pipeline: pipeline.to_owned(),
        }
    }

    pub fn source(&self) -> String {
        self.config
            .source_topic
            .clone()
            .unwrap_or_else(|| format!("{}_source", self.pipeline))
    }

    pub fn dest(&self) -> String {
        format!("{}_dest", self.pipeline)
    }

    pub fn fail(&self) -> String {
        format!("{}_fail", self.pipeline)
    }

    /// Whether a message of `payload_bytes` fits `kafka.max_message_bytes`,
    /// with room for its key and headers.
    pub(super) fn fits(&self, payload_bytes: usize) -> bool {
        payload_bytes + 4096 <= self.config.max_message_bytes
    }

    /// What a dead letter for `doc` carries: the document, or when it is too
    /// large for a Kafka message, only its id and run id (the headers say why).
    pub(super) fn dead_letter_body(&self, doc: &Document) -> Vec<u8> {
        let json = doc.to_json_string();
        if self.fits(json.len()) {
            return json.into_bytes();
        }
        let mut stub = Document::new(doc.id());
        stub.set_run_id(doc.run_id().map(str::to_owned));
        stub.to_json_string().into_bytes()
    }

    /// Where events about documents of `run_id` go, if anywhere.
    pub fn events(&self, run_id: Option<&str>) -> Option<String> {
        if !self.config.events {
            return None;
        }
        match (&self.config.event_topic, run_id) {
            (Some(fixed), _) => Some(fixed.clone()),
            (None, Some(run_id)) => Some(format!("{}_event_{run_id}", self.pipeline)),
            (None, None) => None,
        }
    }

    pub(super) fn client(&self, role: &BTreeMap<String, String>) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.config.bootstrap_servers);
        for (k, v) in self.config.client.iter().chain(role) {
            c.set(k, v);
        }
        c
    }

    pub(super) fn producer_config(&self) -> ClientConfig {
        let mut c = self.client(&BTreeMap::new());
        c.set(
            "message.max.bytes",
            self.config.max_message_bytes.to_string(),
        )
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .set(
            "client.id",
            format!("weir-{}-{}", self.pipeline, std::process::id()),
        );
        for (k, v) in &self.config.producer {
            c.set(k, v);
        }
        c
    }

    pub(super) fn consumer_config(&self, group: &str) -> ClientConfig {
        let mut c = self.client(&BTreeMap::new());
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false")
            .set(
                "fetch.message.max.bytes",
                self.config.max_message_bytes.to_string(),
            )
            .set(
                "max.poll.interval.ms",
                self.config.max_poll_interval.as_millis().to_string(),
            )
            .set("session.timeout.ms", "10000")
            // librdkafka pauses fetching for fetch.queue.backoff.ms (1 s by
            // default) once its prefetch queue is full, which stalls a busy
            // consumer for up to a second after it drains the queue.
            .set("fetch.queue.backoff.ms", "10")
            // Prefetch per partition: enough to keep a worker busy, not the
            // 100,000 documents of librdkafka's default.
            .set("queued.min.messages", "10000")
            // Notice topics created after subscribing within seconds, not minutes.
            .set("topic.metadata.refresh.interval.ms", "5000")
            .set(
                "client.id",
                format!("weir-{}-{}", self.pipeline, std::process::id()),
            );
        for (k, v) in &self.config.consumer {
            c.set(k, v);
        }
        c
    }

    pub fn worker_group(&self) -> String {
        self.config
            .worker_group_id
            .clone()
            .unwrap_or_else(|| format!("weir-{}-workers", self.pipeline))
    }

    pub fn indexer_group(&self) -> String {
        self.config
            .indexer_group_id
            .clone()
            .unwrap_or_else(|| format!("weir-{}-indexers", self.pipeline))
    }

    /// Create `topic` with `partitions` partitions unless it exists.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), MessengerError> {
        self.create_topics(&[(topic.to_owned(), partitions)])
    }

    /// Create each (topic, partitions) unless it exists, in one request.
    pub fn create_topics(&self, topics: &[(String, i32)]) -> Result<(), MessengerError> {
        if topics.is_empty() {
            return Ok(());
        }
        let admin: AdminClient<DefaultClientContext> = self
            .client(&self.config.admin)
            .create()
            .map_err(transport)?;
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|(t, partitions)| NewTopic::new(t, *partitions, TopicReplication::Fixed(1)))
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results =
            futures_executor::block_on(admin.create_topics(&new, &options)).map_err(transport)?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(transport(format!("cannot create topic {name}: {code}")));
                }
            }
        }
        Ok(())
    }

    /// The pipeline's source, destination and fail topics with
    /// `kafka.topic_partitions` partitions, to create where missing; none
    /// without that setting (topics are then left to the cluster's administrators).
    pub(super) fn pipeline_topics(&self) -> Result<Vec<(String, i32)>, MessengerError> {
        let Some(partitions) = self.config.topic_partitions else {
            return Ok(Vec::new());
        };
        let partitions = i32::try_from(partitions).map_err(transport)?;
        Ok([self.source(), self.dest(), self.fail()]
            .into_iter()
            .map(|topic| (topic, partitions))
            .collect())
    }

    /// Create the pipeline's topics where missing (see `kafka.topic_partitions`).
    pub fn ensure_pipeline_topics(&self) -> Result<(), MessengerError> {
        self.create_topics(&self.pipeline_topics()?)
    }

    /// How many partitions `topic` has, if it exists.
    pub fn partitions(&self, topic: &str) -> Result<Option<usize>, MessengerError> {
        let consumer: BaseConsumer = self
            .client(&self.config.consumer)
            .create()
            .map_err(transport)?;
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(transport)?;
        Ok(metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| t.partitions().len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn topic_names_follow_the_pipeline() {
        let mut config = KafkaConfig::new("127.0.0.1:9092");
        let topics = KafkaTopics::new(config.clone(), "books");
        assert_eq!(topics.source(), "books_source");
        assert_eq!(topics.dest(), "books_dest");
        assert_eq!(topics.fail(), "books_fail");
        assert_eq!(topics.events(Some("r1")).as_deref(), Some("books_event_r1"));
        assert_eq!(topics.events(None), None);
        config.event_topic = Some("all_events".into());
        config.source_topic = Some("incoming".into());
        let topics = KafkaTopics::new(config.clone(), "books");
        assert_eq!(topics.events(None).as_deref(), Some("all_events"));
        assert_eq!(topics.source(), "incoming");
        config.events = false;
        assert_eq!(KafkaTopics::new(config, "books").events(Some("r1")), None);
    }
}
