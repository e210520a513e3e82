//! Topic names, client settings and topic administration for one pipeline.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::client::{Quiet, cluster_down, error_code, is_outage};
use super::transport;
use crate::config::KafkaConfig;
use crate::core::document::Document;
use crate::messenger::MessengerError;

/// Topic names and client settings for one pipeline.
#[derive(Debug, Clone)]
pub struct KafkaTopics {
    pub(super) config: KafkaConfig,
    pub(super) pipeline: String,
    /// The largest message to produce: `kafka.max_message_bytes`, lowered to
    /// what the broker accepts once [`KafkaTopics::read_broker_limit`] ran.
    limit: usize,
}

/// How long heartbeats are kept: runners read only the latest ones.
const HEARTBEAT_RETENTION_MS: u64 = 60 * 60 * 1000;

/// A topic to create: its name, partitions and settings.
#[derive(Debug, Clone)]
pub(super) struct TopicSpec {
    pub(super) name: String,
    pub(super) partitions: i32,
    pub(super) config: BTreeMap<String, String>,
}

impl TopicSpec {
    pub(super) fn new(name: &str, partitions: i32) -> Self {
        Self {
            name: name.to_owned(),
            partitions,
            config: BTreeMap::new(),
        }
    }
}

/// Room left in a message for its key, headers (a dead letter's reason is
/// at most 8 KiB) and record overhead.
const HEADROOM: usize = 16 * 1024;

impl KafkaTopics {
    pub fn new(config: KafkaConfig, pipeline: &str) -> Self {
        let prefix = config.topic_prefix.as_deref().unwrap_or_default();
        Self {
            limit: config.max_message_bytes,
            pipeline: format!("{prefix}{pipeline}"),
            config,
        }
    }

    /// What the pipeline's topic and group names start with: its name,
    /// after `kafka.topic_prefix`.
    pub fn base(&self) -> &str {
        &self.pipeline
    }

    /// The largest message this pipeline's clients produce, in bytes.
    pub fn message_limit(&self) -> usize {
        self.limit
    }

    /// Lower the message limit to what the broker accepts on the pipeline's
    /// topics (`max.message.bytes` of each existing topic, the broker's
    /// `message.max.bytes` for one not created yet), so that a document too
    /// large for the cluster fails alone instead of failing its delivery.
    /// When the broker cannot tell, the configured limit stays (logged).
    ///
    /// An unreachable cluster is waited for while `wait` says so (a serving
    /// process, which can do nothing without the cluster anyway, until it
    /// is told to stop): a limit assumed too large would make documents
    /// fail their delivery.
    pub fn read_broker_limit(&mut self, wait: impl Fn() -> bool) {
        let mut logged = false;
        let read = loop {
            match self.broker_limit() {
                Err(e) if error_code(&e).is_some_and(is_outage) && wait() => {
                    cluster_down(&e);
                    if !logged {
                        tracing::warn!(error = %e, "waiting for Kafka to read the broker's message size limit");
                        logged = true;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                read => break read,
            }
        };
        match read {
            Ok(Some(limit)) if limit < self.limit => {
                tracing::info!(
                    limit,
                    configured = self.config.max_message_bytes,
                    "the broker accepts smaller messages than kafka.max_message_bytes; using its limit"
                );
                self.limit = limit;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(
                error = %e,
                "cannot read the broker's message size limit; using kafka.max_message_bytes"
            ),
        }
    }

    fn broker_limit(&self) -> Result<Option<usize>, KafkaError> {
        let admin: AdminClient<Quiet> =
            self.client(&self.config.admin).create_with_context(Quiet)?;
        let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
        let names = [self.source(), self.dest(), self.fail()];
        let specs: Vec<ResourceSpecifier<'_>> =
            names.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
        let results = futures_executor::block_on(admin.describe_configs(&specs, &options))?;
        let value = |resource: &rdkafka::admin::ConfigResource, name: &str| {
            resource
                .get(name)
                .and_then(|e| e.value.as_deref())
                .and_then(|v| v.parse::<usize>().ok())
        };
        let mut limit: Option<usize> = None;
        let mut missing = false;
        for result in results {
            match result.ok().and_then(|r| value(&r, "max.message.bytes")) {
                Some(v) => limit = Some(limit.map_or(v, |l| l.min(v))),
                None => missing = true,
            }
        }
        if missing {
            // A topic the broker will create: it gets the broker's default.
            let consumer: BaseConsumer<Quiet> = self
                .client(&self.config.consumer)
                .create_with_context(Quiet)?;
            let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
            for broker in metadata.brokers() {
                let spec = [ResourceSpecifier::Broker(broker.id())];
                let results = futures_executor::block_on(admin.describe_configs(&spec, &options))?;
                if let Some(v) = results
                    .into_iter()
                    .find_map(|r| r.ok().and_then(|r| value(&r, "message.max.bytes")))
                {
                    limit = Some(limit.map_or(v, |l| l.min(v)));
                }
            }
            // Or the topic settings Weir creates it with (the topic may be
            // being made by another process right now).
            if let Some(v) = self
                .config
                .topic_config
                .get("max.message.bytes")
                .and_then(|v| v.parse::<usize>().ok())
            {
                limit = Some(limit.map_or(v, |l| l.min(v)));
            }
        }
        Ok(limit)
    }

    fn admin(&self) -> Result<AdminClient<Quiet>, MessengerError> {
        self.client(&self.config.admin)
            .create_with_context(Quiet)
            .map_err(transport)
    }

    /// Delete `topics` (those that exist); errors are logged.
    pub fn delete_topics(&self, topics: &[String]) {
        let result = self.admin().and_then(|admin| {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
            futures_executor::block_on(admin.delete_topics(&names, &options)).map_err(transport)
        });
        match result {
            Ok(results) => {
                for result in results {
                    match result {
                        Ok(topic) => tracing::debug!(topic, "topic deleted"),
                        Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                        Err((topic, code)) => {
                            tracing::warn!(topic, error = %code, "cannot delete topic");
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot delete topics"),
        }
    }

    /// Where workers and indexers serving the pipeline announce themselves.
    pub fn heartbeats(&self) -> String {
        format!("{}_heartbeat", self.pipeline)
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

    /// Whether a message of `payload_bytes` fits the message limit, with
    /// room for its key and headers.
    pub(super) fn fits(&self, payload_bytes: usize) -> bool {
        payload_bytes + HEADROOM <= self.limit
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
        c.set("bootstrap.servers", &self.config.bootstrap_servers)
            // Back within a second of the cluster (librdkafka's default
            // backoff grows to 10 s): a worker's queued outputs then reach
            // the topic soon after the cluster returns, not after the
            // partition's new owner has sent newer versions (see fence.rs).
            .set("reconnect.backoff.max.ms", "1000");
        for (k, v) in self.config.client.iter().chain(role) {
            c.set(k, v);
        }
        c
    }

    pub(super) fn producer_config(&self) -> ClientConfig {
        let mut c = self.client(&BTreeMap::new());
        // Batches never grow past what the broker accepts.
        c.set("message.max.bytes", self.limit.to_string())
            .set("linger.ms", "5")
            .set("enable.idempotence", "true")
            .set(
                "client.id",
                format!("weir-{}-{}", self.pipeline, std::process::id()),
            );
        if self.config.topic_partitions.is_some() {
            // Weir makes the pipeline's topics itself, so nothing needs the
            // broker to auto-create one; and late events for a run that
            // ended must not make its deleted event topic again. Nor do
            // they wait 30 s (librdkafka's default) for a topic that is
            // not there to appear: one deleted at the end of a run fails
            // its late events soon, which would otherwise hold a rebalance.
            c.set("allow.auto.create.topics", "false")
                .set("topic.metadata.propagation.max.ms", "5000");
        }
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
            // Lag per partition for the metrics (weir_kafka_consumer_lag).
            .set("statistics.interval.ms", "5000")
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
        self.create_topics(&[TopicSpec::new(topic, partitions)])
    }

    /// Create each topic unless it exists, in one request.
    pub(super) fn create_topics(&self, topics: &[TopicSpec]) -> Result<(), MessengerError> {
        if topics.is_empty() {
            return Ok(());
        }
        let admin = self.admin()?;
        // -1: the broker's default.replication.factor (Kafka 2.4 and later).
        let replicas = self.config.replication_factor.map_or(-1, i32::from);
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|t| {
                t.config.iter().fold(
                    NewTopic::new(&t.name, t.partitions, TopicReplication::Fixed(replicas)),
                    |new, (k, v)| new.set(k, v),
                )
            })
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
    /// `kafka.topic_partitions` partitions and `kafka.topic_config`, to
    /// create where missing; none without that setting (topics are then left
    /// to the cluster's administrators).
    pub(super) fn pipeline_topics(&self) -> Result<Vec<TopicSpec>, MessengerError> {
        let Some(partitions) = self.config.topic_partitions else {
            return Ok(Vec::new());
        };
        let partitions = i32::try_from(partitions).map_err(transport)?;
        Ok([self.source(), self.dest(), self.fail()]
            .into_iter()
            .map(|topic| TopicSpec {
                config: self.config.topic_config.clone(),
                ..TopicSpec::new(&topic, partitions)
            })
            .collect())
    }

    /// Create the pipeline's topics where missing (see
    /// `kafka.topic_partitions`), and its heartbeat topic.
    pub fn ensure_pipeline_topics(&self) -> Result<(), MessengerError> {
        let mut topics = self.pipeline_topics()?;
        if let Some(events) = self.fixed_event_topic(&topics) {
            topics.push(events);
        }
        topics.push(self.heartbeat_topic());
        self.create_topics(&topics)
    }

    /// A `kafka.event_topic` shared by every run is a pipeline topic: a
    /// worker or indexer that starts before any runner creates it, since
    /// producers do not auto-create topics when Weir makes them. Per-run
    /// event topics are only ever made by their runner.
    fn fixed_event_topic(&self, pipeline: &[TopicSpec]) -> Option<TopicSpec> {
        if !self.config.events || pipeline.is_empty() {
            return None;
        }
        let name = self.config.event_topic.as_ref()?;
        Some(TopicSpec {
            config: self.config.topic_config.clone(),
            ..TopicSpec::new(name, 1)
        })
    }

    /// Delete the pipeline's source, destination, fail and heartbeat
    /// topics (a retired fleet spec's); failures are logged.
    pub fn delete_pipeline_topics(&self) {
        self.delete_topics(&[self.source(), self.dest(), self.fail(), self.heartbeats()]);
    }

    /// The heartbeat topic: one partition, an hour of history.
    pub(super) fn heartbeat_topic(&self) -> TopicSpec {
        let mut spec = TopicSpec::new(&self.heartbeats(), 1);
        spec.config
            .insert("retention.ms".into(), HEARTBEAT_RETENTION_MS.to_string());
        spec
    }

    /// Source records the pipeline's worker group has not committed yet,
    /// over every partition of the source topic.
    pub fn worker_lag(&self) -> Result<u64, MessengerError> {
        let consumer: BaseConsumer<Quiet> = self
            .consumer_config(&self.worker_group())
            .create_with_context(Quiet)
            .map_err(transport)?;
        let source = self.source();
        let timeout = Duration::from_secs(10);
        let metadata = consumer
            .fetch_metadata(Some(&source), timeout)
            .map_err(transport)?;
        let mut tpl = rdkafka::TopicPartitionList::new();
        for topic in metadata.topics().iter().filter(|t| t.name() == source) {
            for partition in topic.partitions() {
                tpl.add_partition(&source, partition.id());
            }
        }
        let committed = consumer
            .committed_offsets(tpl, timeout)
            .map_err(transport)?;
        let mut lag = 0_u64;
        for element in committed.elements() {
            let (low, high) = consumer
                .fetch_watermarks(&source, element.partition(), timeout)
                .map_err(transport)?;
            let at = element
                .offset()
                .to_raw()
                .filter(|o| *o >= 0)
                .unwrap_or(low)
                .max(low);
            lag += u64::try_from(high - at).unwrap_or(0);
        }
        Ok(lag)
    }

    /// How many partitions `topic` has, if it exists.
    pub fn partitions(&self, topic: &str) -> Result<Option<usize>, MessengerError> {
        let consumer: BaseConsumer<Quiet> = self
            .client(&self.config.consumer)
            .create_with_context(Quiet)
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
