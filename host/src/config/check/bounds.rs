//! The largest value of every number a config sets: what the runtime can
//! give, and nothing that would size an allocation, start threads or add to
//! a clock past what one machine holds; and the span of every duration
//! ([`SPANS`]: the shortest as well as the longest). (Retry counts are not bounded here:
//! retrying allocates nothing, and deadlines and stall detection bound how
//! long a run may retry.) A number is checked here before
//! anything is built from it; the lower bounds (at least 1, more than zero)
//! are the other checks', and `weir serve` applies the operator's tighter
//! ceilings on top of these.

use std::time::Duration;

use super::Found;
use crate::config::{Config, KafkaConfig, Problem, StageBatch};
use crate::core::limit::Limit;

/// Longest any duration a config sets: 30 days.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Documents a queue may hold.
pub const MAX_QUEUE_CAPACITY: u64 = 1_000_000;
/// MiB of documents a queue may hold (64 GiB).
pub const MAX_QUEUE_MIB: u64 = 64 << 10;
/// Worker threads (and worker–indexer pairs) of one process.
pub const MAX_WORKER_THREADS: u64 = 256;
/// Documents in one indexer batch.
pub const MAX_BATCH_SIZE: u64 = 100_000;
/// Bytes of documents in one indexer batch (1 GiB).
pub const MAX_BATCH_BYTES: u64 = 1 << 30;
/// Documents per second a publisher may be set to.
pub const MAX_DOCS_PER_SECOND: u64 = 1_000_000_000;
/// MiB of compiled plugins kept on disk (1 TiB).
pub const MAX_CACHE_MIB: u64 = 1 << 20;
/// Most MiB one run's trace may be allowed.
pub const MAX_TRACE_MIB: u64 = 1 << 20;
/// MiB of memory one plugin instance may hold: a 32-bit WebAssembly memory
/// holds at most 4 GiB.
pub const MAX_PLUGIN_MEMORY_MIB: u64 = 4 << 10;
/// MiB of state one connector may keep between runs (the host holds it in
/// memory during a run).
pub const MAX_STATE_MIB: u64 = 4 << 10;
/// Documents one plugin call may create and hold.
pub const MAX_CHILDREN: u64 = 1_000_000;
/// Log lines per second one plugin may write.
pub const MAX_LOG_LINES_PER_SECOND: u64 = 1_000_000;
/// Bytes of one Kafka message (Kafka's own ceiling is just under 2 GiB).
pub const MAX_MESSAGE_BYTES: u64 = 1 << 30;
/// Partitions of a pipeline's topics.
pub const MAX_PARTITIONS: u64 = 100_000;
/// Longest `kafka.max_poll_interval`: Kafka's `max.poll.interval.ms` is a
/// 32-bit count of milliseconds (about 24.8 days).
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(24 * 24 * 60 * 60);

/// Refuse `value` at `location` when it is over `max`.
fn count(found: &mut Found, location: impl Into<String>, value: u64, max: u64) {
    if value > max {
        found.push(Problem::new(location, format!("must be at most {max}")));
    }
}

/// The shortest and longest a duration may be.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub min: Duration,
    pub max: Duration,
}

impl Span {
    const fn new(min: Duration, max: Duration) -> Self {
        Self { min, max }
    }
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Every duration a config sets, its key (as `runner.log_interval`, a
/// plugin's as `limits.call_timeout`) and the span it must be in. A
/// minimum keeps a setting from making the host work or write without
/// pause (a log line every millisecond, a heartbeat flood, retries in a
/// tight loop, a plugin trapping on every call), a maximum from adding
/// past what a clock holds. `worker`/`indexer` backoffs and batch waits of
/// stages are bounded here too; `0s` is allowed only where it means
/// "none" (a stage's `batch.wait`, `runner.grace_period`).
pub const SPANS: [(&str, Span); 16] = [
    ("runner.connector_timeout", Span::new(ms(100), MAX_DURATION)),
    ("runner.log_interval", Span::new(ms(1000), MAX_DURATION)),
    ("runner.report_every", Span::new(ms(1000), MAX_DURATION)),
    ("runner.stall_timeout", Span::new(ms(1000), MAX_DURATION)),
    ("runner.liveness_timeout", Span::new(ms(1000), MAX_DURATION)),
    (
        "runner.grace_period",
        Span::new(Duration::ZERO, MAX_DURATION),
    ),
    ("worker.retry_backoff", Span::new(ms(1), MAX_DURATION)),
    ("worker.retry_max_backoff", Span::new(ms(1), MAX_DURATION)),
    ("indexer.batch_timeout", Span::new(ms(1), MAX_DURATION)),
    ("indexer.retry_backoff", Span::new(ms(1), MAX_DURATION)),
    ("indexer.retry_max_backoff", Span::new(ms(1), MAX_DURATION)),
    (
        "stages.batch.wait",
        Span::new(Duration::ZERO, StageBatch::MAX_WAIT),
    ),
    (
        "kafka.max_poll_interval",
        Span::new(ms(1000), MAX_POLL_INTERVAL),
    ),
    ("kafka.heartbeat_interval", Span::new(ms(100), MAX_DURATION)),
    (
        Limit::CallTimeout.set_by_config(),
        Span::new(ms(10), MAX_DURATION),
    ),
    (
        Limit::ExecuteTimeout.set_by_config(),
        Span::new(ms(10), MAX_DURATION),
    ),
];

/// The span of the duration `key` (as [`SPANS`] names it).
pub fn span_of(key: &str) -> Span {
    SPANS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, span)| *span)
        .expect("every duration a config sets has a span")
}

/// Refuse a duration at `location` when it is outside the span of `key`.
fn span(found: &mut Found, location: impl Into<String>, key: &str, value: Duration) {
    let Span { min, max } = span_of(key);
    if value > max {
        found.push(Problem::new(
            location,
            format!("must be at most {}", humantime::format_duration(max)),
        ));
    } else if value < min {
        found.push(Problem::new(
            location,
            format!(
                "must be at least {} (is {})",
                humantime::format_duration(min),
                humantime::format_duration(value)
            ),
        ));
    }
}

/// A `usize` as the `u64` the bounds are written in (saturating).
fn wide(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

pub(super) fn check(config: &Config, found: &mut Found) {
    if let Some(why) = config.state.max_delete_share_problem() {
        found.push(Problem::new("state.max_delete_share", why));
    }
    let runner = &config.runner;
    for (name, value) in [
        ("connector_timeout", runner.connector_timeout),
        ("log_interval", runner.log_interval),
        ("report_every", runner.report_every),
        ("stall_timeout", runner.stall_timeout),
        ("liveness_timeout", runner.liveness_timeout),
        ("grace_period", runner.grace_period),
    ] {
        let key = format!("runner.{name}");
        span(found, &key, &key, value);
    }
    count(
        found,
        "runner.cache_max_mib",
        runner.cache_max_mib,
        MAX_CACHE_MIB,
    );

    if config.trace.max_mib == 0 {
        found.push(Problem::new("trace.max_mib", "must be at least 1"));
    }
    count(found, "trace.max_mib", config.trace.max_mib, MAX_TRACE_MIB);

    let publisher = &config.publisher;
    count(
        found,
        "publisher.queue_capacity",
        wide(publisher.queue_capacity),
        MAX_QUEUE_CAPACITY,
    );
    count(
        found,
        "publisher.queue_max_mib",
        wide(publisher.queue_max_mib),
        MAX_QUEUE_MIB,
    );
    if let Some(rate) = publisher.max_docs_per_second {
        if rate == 0 {
            found.push(Problem::new(
                "publisher.max_docs_per_second",
                "must be at least 1",
            ));
        }
        count(
            found,
            "publisher.max_docs_per_second",
            rate.into(),
            MAX_DOCS_PER_SECOND,
        );
    }

    let worker = &config.worker;
    count(
        found,
        "worker.threads",
        wide(worker.threads),
        MAX_WORKER_THREADS,
    );
    for (key, value) in [
        ("worker.retry_backoff", worker.retry_backoff),
        ("worker.retry_max_backoff", worker.retry_max_backoff),
    ] {
        span(found, key, key, value);
    }

    for pipeline in &config.pipelines {
        for stage in &pipeline.stages {
            let at = format!("pipelines.{}.stages.{}.batch", pipeline.name, stage.name);
            if stage.batch.size == 0 {
                found.push(Problem::new(format!("{at}.size"), "must be at least 1"));
            }
            count(
                found,
                format!("{at}.size"),
                wide(stage.batch.size),
                wide(StageBatch::MAX_SIZE),
            );
            span(
                found,
                format!("{at}.wait"),
                "stages.batch.wait",
                stage.batch.wait,
            );
        }
    }

    for (location, indexer) in config.indexers() {
        count(
            found,
            format!("{location}.batch_size"),
            wide(indexer.batch_size),
            MAX_BATCH_SIZE,
        );
        count(
            found,
            format!("{location}.batch_max_bytes"),
            wide(indexer.batch_max_bytes),
            MAX_BATCH_BYTES,
        );
        for (name, value) in [
            ("batch_timeout", indexer.batch_timeout),
            ("retry_backoff", indexer.retry_backoff),
            ("retry_max_backoff", indexer.retry_max_backoff),
        ] {
            span(
                found,
                format!("{location}.{name}"),
                &format!("indexer.{name}"),
                value,
            );
        }
    }

    for at in config.plugins() {
        let limits = &at.spec.limits;
        let at = |limit: Limit| format!("{}.plugin.{limit}", at.location);
        count(
            found,
            at(Limit::MemoryMib),
            limits.memory_mib(),
            MAX_PLUGIN_MEMORY_MIB,
        );
        count(
            found,
            at(Limit::MaxDocumentMib),
            limits.max_document_mib(),
            MAX_PLUGIN_MEMORY_MIB,
        );
        count(
            found,
            at(Limit::MaxChildren),
            limits.max_children().into(),
            MAX_CHILDREN,
        );
        count(
            found,
            at(Limit::LogLinesPerSecond),
            limits.log_lines_per_second().into(),
            MAX_LOG_LINES_PER_SECOND,
        );
        count(
            found,
            at(Limit::MaxStateMib),
            limits.max_state_mib(),
            MAX_STATE_MIB,
        );
        span(
            found,
            at(Limit::CallTimeout),
            Limit::CallTimeout.set_by_config(),
            limits.call_timeout(),
        );
        span(
            found,
            at(Limit::ExecuteTimeout),
            Limit::ExecuteTimeout.set_by_config(),
            limits.execute_timeout(),
        );
    }

    if let Some(kafka) = &config.kafka {
        check_kafka(kafka, found);
    }
}

fn check_kafka(kafka: &KafkaConfig, found: &mut Found) {
    for (key, value) in [
        ("kafka.max_poll_interval", kafka.max_poll_interval),
        ("kafka.heartbeat_interval", kafka.heartbeat_interval),
    ] {
        span(found, key, key, value);
    }
    count(
        found,
        "kafka.max_message_bytes",
        wide(kafka.max_message_bytes),
        MAX_MESSAGE_BYTES,
    );
    if let Some(partitions) = kafka.topic_partitions {
        count(
            found,
            "kafka.topic_partitions",
            partitions.into(),
            MAX_PARTITIONS,
        );
    }
}
