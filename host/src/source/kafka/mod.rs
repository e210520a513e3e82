//! A Kafka topic source (`grants.kafka`): the host's rdkafka consumer.

use std::time::Duration;

use super::Opening;
use crate::core::messages::{Delivery, ReceiveError, Settled, Source};
use crate::plugin::KafkaGrant;

/// Topics of one grant, consumed as its consumer group.
pub(crate) struct KafkaSource {
    describe: String,
}

impl KafkaSource {
    pub(crate) fn open(grant: &KafkaGrant, _at: &Opening<'_>) -> Result<Self, String> {
        Ok(Self {
            describe: format!("kafka {} (group {})", grant.topics.join(","), grant.group),
        })
    }
}

impl Source for KafkaSource {
    fn receive(&self, _max: usize, _wait: Duration) -> Result<Vec<Delivery>, ReceiveError> {
        Err(ReceiveError::Failed("not yet".into()))
    }
    fn settle(&self, _token: u64, _settled: Settled) {}
    fn close(&self) {}
    fn describe(&self) -> String {
        self.describe.clone()
    }
}
