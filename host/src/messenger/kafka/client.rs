//! The cluster as every Weir client sees it: an outage is logged once
//! when it starts and once when it ends; librdkafka's own errors, logs and
//! statistics; and what a failed poll or commit means.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::transport;
use crate::messenger::MessengerError;

/// Since when this process cannot reach the cluster, if it cannot: an
/// outage is logged once when it starts and once when it ends, whichever of
/// the process's clients notices, instead of on every poll and reconnect.
static OUTAGE: Mutex<Option<std::time::Instant>> = Mutex::new(None);
/// Whether [`OUTAGE`] is set: the hot path reads only this.
static DOWN: AtomicBool = AtomicBool::new(false);

/// A client reached the cluster: a broker acknowledged a message, or
/// answered a request. (A message a consumer returns is no evidence: it
/// may have been fetched before the cluster went.)
pub(super) fn cluster_up() {
    if !DOWN.load(Ordering::Relaxed) {
        return;
    }
    let mut outage = OUTAGE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(since) = outage.take() {
        DOWN.store(false, Ordering::Relaxed);
        tracing::info!(after = ?since.elapsed(), "Kafka is reachable again");
    }
}

/// A client could not reach the cluster.
pub(super) fn cluster_down(error: &dyn std::fmt::Display) {
    let mut outage = OUTAGE.lock().unwrap_or_else(PoisonError::into_inner);
    if outage.is_none() {
        *outage = Some(std::time::Instant::now());
        DOWN.store(true, Ordering::Relaxed);
        tracing::error!(%error, "lost Kafka; retrying until it is back");
    } else {
        tracing::debug!(%error, "Kafka still unreachable");
    }
}

/// What every Weir client does with librdkafka's own errors and logs: a
/// lost connection is an outage (logged once); other errors are logged;
/// librdkafka's log lines are debug output (the errors come here too).
pub(super) fn client_error(error: &KafkaError, reason: &str) {
    if error_code(error).is_some_and(is_outage) {
        cluster_down(&reason);
    } else {
        tracing::warn!(%error, reason, "Kafka client error");
    }
}

pub(super) fn client_log(level: RDKafkaLogLevel, facility: &str, message: &str) {
    if resets_an_offset(level, facility) {
        // The consumer will read again from the start of the partition, or
        // skip to its end: an operator wants to know (reprocessing, lag).
        tracing::warn!(facility, message, "librdkafka reset a consumer's offset");
    } else {
        tracing::debug!(?level, facility, message, "librdkafka");
    }
}

/// Whether a librdkafka log line is an offset reset forced by an error (an
/// offset out of range, a truncated log), which it logs as a warning.
fn resets_an_offset(level: RDKafkaLogLevel, facility: &str) -> bool {
    facility == "OFFSET" && (level as i32) <= (RDKafkaLogLevel::Warning as i32)
}

/// Give a client context type Weir's handling of librdkafka's errors and
/// logs ([`client_error`], [`client_log`]).
macro_rules! quiet_client_context {
    ($context:ty) => {
        impl rdkafka::ClientContext for $context {
            fn log(&self, level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
                $crate::messenger::kafka::client::client_log(level, facility, message);
            }

            fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
                $crate::messenger::kafka::client::client_error(&error, reason);
            }

            fn stats(&self, statistics: rdkafka::Statistics) {
                $crate::messenger::kafka::client::client_stats(&statistics);
            }
        }
    };
}
pub(super) use quiet_client_context;

/// A consumer's lag per partition, from librdkafka's statistics (every
/// `statistics.interval.ms`), into the metrics.
pub(crate) fn client_stats(statistics: &rdkafka::Statistics) {
    if statistics.client_type != "consumer" {
        return;
    }
    for (topic, stats) in &statistics.topics {
        for (&partition, p) in &stats.partitions {
            // -1: the internal partition, or a lag not known yet.
            if partition >= 0 && p.consumer_lag >= 0 {
                crate::telemetry::meters::kafka_lag(
                    &statistics.client_id,
                    topic,
                    partition,
                    p.consumer_lag,
                );
            }
        }
    }
}

/// The context of clients with no callbacks of their own (the runner's
/// event and heartbeat readers, heartbeat producers, admin clients).
pub(super) struct Quiet;

quiet_client_context!(Quiet);

impl rdkafka::consumer::ConsumerContext for Quiet {}

impl rdkafka::producer::ProducerContext for Quiet {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, (): ()) {
        match result {
            Ok(_) => cluster_up(),
            Err((e, _)) => tracing::debug!(error = %e, "not delivered"),
        }
    }
}

/// A poll's error: transient ones (a topic not created yet, a broker
/// restarting) are logged once per outage and the poll counts as idle;
/// fatal ones stop.
pub(super) fn poll_error(e: KafkaError) -> Result<(), MessengerError> {
    match e {
        KafkaError::MessageConsumption(code) => {
            if is_outage(code) {
                cluster_down(&code);
            } else {
                // E.g. a topic not created yet: librdkafka retries.
                tracing::debug!(error = %code, "Kafka consumer reported an error; continuing");
            }
            std::thread::sleep(Duration::from_millis(100));
            Ok(())
        }
        fatal => Err(transport(fatal)),
    }
}

/// A polled message, or `None` when the poll failed transiently (it counts
/// as idle, see [`poll_error`]); a fatal error stops.
pub(super) fn polled<M>(message: Result<M, KafkaError>) -> Result<Option<M>, MessengerError> {
    match message {
        Ok(message) => Ok(Some(message)),
        Err(e) => poll_error(e).map(|()| None),
    }
}

/// The code of a client error, admin operations' included.
pub(super) fn error_code(error: &KafkaError) -> Option<RDKafkaErrorCode> {
    match error {
        KafkaError::AdminOp(code) => Some(*code),
        other => other.rdkafka_error_code(),
    }
}

/// An offset commit the cluster did not take: an outage (logged once), or
/// anything else (logged). Never fatal: offsets only move forward, so the
/// next commit covers this one, and without one the records are redelivered.
pub(super) fn commit_failed(error: &KafkaError) {
    if error_code(error).is_some_and(is_outage) {
        cluster_down(error);
    } else {
        tracing::warn!(%error, "offset commit failed; a later commit covers it");
    }
}

/// Whether `code` says the cluster cannot be reached.
pub(super) fn is_outage(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::AllBrokersDown
            | RDKafkaErrorCode::Resolve
            | RDKafkaErrorCode::NetworkException
            | RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::RequestTimedOut
    )
}
