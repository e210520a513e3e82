//! Every metric Weir records, defined once, here, as a typed meter or
//! event: no metric name appears anywhere else, and a meter nothing emits
//! is dead code, which the build refuses (`-D warnings`).
//!
//! Hot paths hold handles (a [`metrics::Counter`] is an `Arc` to its
//! atomic) made once per worker or indexer; rare events (failures, traps)
//! look their series up when they happen. Labels are bounded: pipeline,
//! tenant, plugin, stage, connector, outcome kinds and limit names; never a
//! document id. A pipeline that no tenant owns has `tenant=""`.
//!
//! The names follow Prometheus' conventions: `_total` for counters,
//! `_seconds` and `_bytes` for units.

use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

use crate::core::limit::Limit;
use crate::core::trap::TrapCause;

/// Documents published by connectors.
const DOCS_PUBLISHED: &str = "weir_docs_published_total";
/// Documents a worker took and ran through its pipeline (any outcome).
const DOCS_PROCESSED: &str = "weir_docs_processed_total";
/// Child documents stages made.
const DOCS_CREATED: &str = "weir_docs_created_total";
/// Documents dropped by a stage.
/// Documents a stage's condition (`when`) left out: they passed it untouched.
const DOCS_SKIPPED: &str = "weir_docs_skipped_total";
const DOCS_DROPPED: &str = "weir_docs_dropped_total";
/// Documents the backend took.
const DOCS_INDEXED: &str = "weir_docs_indexed_total";
/// Deletion markers the backend took (among those indexed): documents
/// deleted.
const DOCS_DELETED: &str = "weir_docs_deleted_total";
/// Documents that failed for good (after their retries).
const DOCS_FAILED: &str = "weir_docs_failed_total";
/// Failed documents kept as dead letters (file or plugin; Kafka's fail
/// topic is counted by the failures themselves).
const DEAD_LETTERS: &str = "weir_dead_letters_total";
/// Seconds per call into a plugin (a stage's process-document, an
/// indexer's send-batch).
const PLUGIN_CALL_SECONDS: &str = "weir_plugin_call_seconds";
/// Seconds one document spent in its whole pipeline.
const PIPELINE_SECONDS: &str = "weir_pipeline_seconds";
/// Documents per batch sent to an indexer plugin.
const BATCH_SIZE: &str = "weir_batch_size";
/// Calls made again: stage calls (worker retries), whole batches, and
/// documents an indexer's backend refused for now.
const RETRIES: &str = "weir_retries_total";
/// Plugin calls that trapped, by cause.
const PLUGIN_TRAPS: &str = "weir_plugin_traps_total";
/// Plugin calls stopped, or log lines dropped, at one of the plugin's limits.
const LIMIT_HITS: &str = "weir_limit_hits_total";
/// Plugins' outgoing HTTP requests refused by their grants, by reason.
const HTTP_REFUSED: &str = "weir_http_requests_refused_total";
/// Plugin instances replaced after a trap.
const INSTANCE_RESTARTS: &str = "weir_plugin_instance_restarts_total";
/// Documents published and not yet settled in a run of this process.
const DOCS_PENDING: &str = "weir_docs_pending";
/// Records a Kafka consumer of this process has yet to read, per partition.
const KAFKA_LAG: &str = "weir_kafka_consumer_lag";
/// Resident memory of the process.
const RESIDENT_BYTES: &str = "weir_process_resident_memory_bytes";
/// Runs this process finished, by status (`weir run`, and `weir serve`'s).
const RUNS: &str = "weir_runs_total";
/// Runs going on in this process now.
const RUNS_ACTIVE: &str = "weir_runs_active";
/// Continuous runs of `weir serve` whose process died and was started
/// again, per tenant.
const RUN_RESTARTS: &str = "weir_run_restarts_total";
/// Connections an HTTP server of this process closed at once, being at its
/// `max_connections`.
const HTTP_CONNECTIONS_REFUSED: &str = "weir_http_connections_refused_total";
/// `weir serve` API requests answered 429 by a rate limit, by who sent them
/// (a tenant, `operator`, or `unknown` for unknown tokens).
const API_REQUESTS_LIMITED: &str = "weir_api_requests_limited_total";
/// Config reloads this process was asked for, by outcome (`applied`,
/// `unchanged`, `refused`).
const CONFIG_RELOADS: &str = "weir_config_reloads_total";
/// The config generation a pipeline's workers in this process run (1 at
/// start, one more for each applied reload that changed the pipeline).
const STAGES_GENERATION: &str = "weir_stages_generation";
/// Documents a shadow stage ran on, by whether its output was the live
/// stage's (`same`, `differs`, `failed`: the shadow could not run).
const SHADOW_DOCS: &str = "weir_shadow_documents_total";
/// Documents a tap sent to its reader, or dropped when the reader was behind.
const TAP_DOCS: &str = "weir_tap_documents_total";
/// Keys plugins looked up in the host's cache (the `cache` interface), by
/// outcome (`hit`, `miss`).
const CACHE_LOOKUPS: &str = "weir_cache_lookups_total";
/// Starts of `weir serve` schedules that came due, by tenant and outcome.
const SCHEDULED_STARTS: &str = "weir_scheduled_starts_total";
/// Lines pushed to runs (`weir serve`), by tenant and outcome.
const PUSHED_LINES: &str = "weir_pushed_lines_total";
/// Pushes refused whole, by tenant and HTTP status.
const PUSHES_REFUSED: &str = "weir_pushes_refused_total";
/// Calls of the `cache` interface the host's cache could not serve (a
/// broken or locked file, a full disk): the plugin went on without it.
const CACHE_FAILURES: &str = "weir_cache_failures_total";

/// Describe every metric to the recorder (Prometheus' `# HELP` lines).
pub(crate) fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(DOCS_PUBLISHED, "Documents published by connectors");
    describe_counter!(
        PUSHED_LINES,
        "Lines pushed to runs, by outcome (accepted, dead_lettered, abandoned)"
    );
    describe_counter!(PUSHES_REFUSED, "Pushes refused whole, by HTTP status");
    describe_counter!(
        SCHEDULED_STARTS,
        "Starts of tenants' schedules on weir serve, by outcome (started, or why skipped: overlap, late, quota, unkept, failed)"
    );
    describe_counter!(
        CONFIG_RELOADS,
        "Config reloads asked for, by outcome (applied, unchanged, refused)"
    );
    describe_gauge!(
        STAGES_GENERATION,
        "The config generation a pipeline's workers in this process run"
    );
    describe_counter!(
        SHADOW_DOCS,
        "Documents a shadow stage ran on, by whether its output was the live stage's"
    );
    describe_counter!(
        TAP_DOCS,
        "Documents a tap sent to its reader (sent) or dropped for a slow reader (dropped)"
    );
    describe_counter!(
        DOCS_PROCESSED,
        "Documents run through a pipeline by a worker"
    );
    describe_counter!(DOCS_CREATED, "Child documents made by stages");
    describe_counter!(
        DOCS_SKIPPED,
        "Documents a stage's condition left out, which passed it untouched"
    );
    describe_counter!(DOCS_DROPPED, "Documents dropped by a stage");
    describe_counter!(DOCS_INDEXED, "Documents the indexer's backend took");
    describe_counter!(
        DOCS_DELETED,
        "Deletion markers the indexer's backend took: documents deleted"
    );
    describe_counter!(DOCS_FAILED, "Documents that failed for good");
    describe_counter!(DEAD_LETTERS, "Failed documents kept as dead letters");
    describe_histogram!(PLUGIN_CALL_SECONDS, Unit::Seconds, "Time per plugin call");
    describe_histogram!(
        PIPELINE_SECONDS,
        Unit::Seconds,
        "Time per document in its pipeline"
    );
    describe_histogram!(BATCH_SIZE, Unit::Count, "Documents per indexer batch");
    describe_counter!(RETRIES, "Stage calls, batches and documents sent again");
    describe_counter!(PLUGIN_TRAPS, "Plugin calls that trapped, by cause");
    describe_counter!(
        LIMIT_HITS,
        "Plugin calls stopped (or log lines dropped) at a limit"
    );
    describe_counter!(
        HTTP_REFUSED,
        "Plugins' outgoing HTTP requests refused by their grants"
    );
    describe_counter!(INSTANCE_RESTARTS, "Plugin instances replaced after a trap");
    describe_gauge!(DOCS_PENDING, "Documents published and not yet settled");
    describe_gauge!(KAFKA_LAG, "Records a Kafka consumer has yet to read");
    describe_gauge!(
        RESIDENT_BYTES,
        Unit::Bytes,
        "Resident memory of the process"
    );
    describe_counter!(RUNS, "Runs finished, by status");
    describe_gauge!(RUNS_ACTIVE, "Runs going on now");
    describe_counter!(
        RUN_RESTARTS,
        "Continuous runs whose process died and was started again"
    );
    describe_counter!(
        HTTP_CONNECTIONS_REFUSED,
        "Connections closed at once, the server being at its max_connections"
    );
    describe_counter!(
        API_REQUESTS_LIMITED,
        "API requests answered 429 by a rate limit, by sender"
    );
    describe_counter!(
        CACHE_LOOKUPS,
        "Keys looked up in the host's cache, by outcome (hit, miss)"
    );
    describe_counter!(
        CACHE_FAILURES,
        "Cache calls the host's cache could not serve (the plugin went on without it)"
    );
}

/// The labels every document metric of a pipeline carries.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pipeline: Arc<str>,
    tenant: Arc<str>,
}

impl Scope {
    pub(crate) fn new(pipeline: &str, tenant: Option<&str>) -> Self {
        Self {
            pipeline: Arc::from(pipeline),
            tenant: Arc::from(tenant.unwrap_or("")),
        }
    }

    fn labels(&self) -> Vec<(&'static str, String)> {
        vec![
            ("pipeline", self.pipeline.to_string()),
            ("tenant", self.tenant.to_string()),
        ]
    }

    fn with(&self, more: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        let mut labels = self.labels();
        labels.extend(more.iter().map(|(k, v)| (*k, (*v).to_owned())));
        labels
    }

    /// A document failed for good in `plugin` (`weir` for the host's own
    /// refusals; traps are also counted by cause, see [`plugin_trapped`]).
    pub(crate) fn document_failed(&self, plugin: &str) {
        counter!(DOCS_FAILED, &self.with(&[("plugin", plugin)])).increment(1);
    }

    /// How long `plugin`'s calls of `call` take.
    fn call_seconds(&self, plugin: &str, call: &str) -> Histogram {
        histogram!(
            PLUGIN_CALL_SECONDS,
            &self.with(&[("plugin", plugin), ("call", call)])
        )
    }

    /// Retries of `what` (a call, a batch, a document) for `plugin`.
    fn retries(&self, plugin: &str, what: &str) -> Counter {
        counter!(RETRIES, &self.with(&[("plugin", plugin), ("what", what)]))
    }

    pub(crate) fn pipeline(&self) -> &Arc<str> {
        &self.pipeline
    }

    /// A failed document was kept as a dead letter.
    pub(crate) fn dead_lettered(&self) {
        counter!(DEAD_LETTERS, &self.labels()).increment(1);
    }

    /// Documents published by `connector`.
    pub(crate) fn published(&self, connector: &str) -> Counter {
        counter!(DOCS_PUBLISHED, &self.with(&[("connector", connector)]))
    }

    /// This process's workers of the pipeline now run config `generation`.
    pub(crate) fn stages_generation(&self, generation: u64) {
        gauge!(STAGES_GENERATION, &self.labels()).set(generation as f64);
    }

    /// A shadow of `stage` ran on a document: `outcome` is `same`,
    /// `differs` or `failed`.
    pub(crate) fn shadowed(&self, stage: &str, outcome: &'static str) {
        counter!(
            SHADOW_DOCS,
            &self.with(&[("stage", stage), ("outcome", outcome)])
        )
        .increment(1);
    }

    /// Documents published and not yet settled in this process's run.
    pub(crate) fn pending(&self) -> Gauge {
        gauge!(DOCS_PENDING, &self.labels())
    }
}

/// A worker's meters for its pipeline.
#[derive(Debug)]
pub(crate) struct PipelineMeters {
    pub(crate) processed: Counter,
    pub(crate) seconds: Histogram,
    pub(crate) dropped: Counter,
}

impl PipelineMeters {
    pub(crate) fn new(scope: &Scope) -> Self {
        Self {
            processed: counter!(DOCS_PROCESSED, &scope.labels()),
            seconds: histogram!(PIPELINE_SECONDS, &scope.labels()),
            dropped: counter!(DOCS_DROPPED, &scope.labels()),
        }
    }
}

/// One stage instance's meters.
#[derive(Debug)]
pub(crate) struct StageMeters {
    pub(crate) call_seconds: Histogram,
    pub(crate) created: Counter,
    pub(crate) retries: Counter,
    pub(crate) restarts: Counter,
    pub(crate) skipped: Counter,
}

impl StageMeters {
    /// The meters of `stage`, whose calls are `call` (`process-document`
    /// or `process-batch`).
    pub(crate) fn new(scope: &Scope, stage: &str, call: &'static str) -> Self {
        Self {
            call_seconds: scope.call_seconds(stage, call),
            created: counter!(DOCS_CREATED, &scope.with(&[("plugin", stage)])),
            retries: scope.retries(stage, "call"),
            restarts: counter!(INSTANCE_RESTARTS, &scope.with(&[("plugin", stage)])),
            skipped: counter!(DOCS_SKIPPED, &scope.with(&[("plugin", stage)])),
        }
    }
}

/// One indexer instance's meters.
#[derive(Debug)]
pub(crate) struct IndexerMeters {
    pub(crate) indexed: Counter,
    pub(crate) deleted: Counter,
    pub(crate) call_seconds: Histogram,
    pub(crate) batch_size: Histogram,
    pub(crate) batch_retries: Counter,
    pub(crate) document_retries: Counter,
}

impl IndexerMeters {
    pub(crate) fn new(scope: &Scope, plugin: &str) -> Self {
        let labels = scope.with(&[("plugin", plugin)]);
        Self {
            indexed: counter!(DOCS_INDEXED, &labels),
            deleted: counter!(DOCS_DELETED, &labels),
            call_seconds: scope.call_seconds(plugin, "send-batch"),
            batch_size: histogram!(BATCH_SIZE, &labels),
            batch_retries: scope.retries(plugin, "batch"),
            document_retries: scope.retries(plugin, "document"),
        }
    }
}

/// A call into `plugin` (of `tenant`, if any) trapped: counted by cause,
/// and as a limit hit when a limit stopped it.
pub(crate) fn plugin_trapped(plugin: &str, tenant: Option<&str>, cause: &TrapCause) {
    let tenant = tenant.unwrap_or("").to_owned();
    counter!(
        PLUGIN_TRAPS,
        "plugin" => plugin.to_owned(),
        "tenant" => tenant.clone(),
        "cause" => cause.kind()
    )
    .increment(1);
    if let Some(limit) = cause.limit() {
        limit_hit(plugin, Some(&tenant), limit);
    }
}

/// `plugin` went past `limit`: its call was stopped,
/// or its log lines dropped.
pub(crate) fn limit_hit(plugin: &str, tenant: Option<&str>, limit: Limit) {
    counter!(
        LIMIT_HITS,
        "plugin" => plugin.to_owned(),
        "tenant" => tenant.unwrap_or("").to_owned(),
        "limit" => limit.label()
    )
    .increment(1);
}

/// A plugin's outgoing HTTP request was refused, for `reason` (a bounded
/// label: `not_granted`, `address_not_granted`).
pub(crate) fn http_refused(plugin: &str, tenant: Option<&str>, reason: &'static str) {
    counter!(
        HTTP_REFUSED,
        "plugin" => plugin.to_owned(),
        "tenant" => tenant.unwrap_or("").to_owned(),
        "reason" => reason
    )
    .increment(1);
}

/// A config reload ended: `applied`, `unchanged` or `refused`.
pub(crate) fn config_reloaded(outcome: &'static str) {
    counter!(CONFIG_RELOADS, "outcome" => outcome).increment(1);
}

/// Documents a tap sent (`sent`) or dropped for a slow reader (`dropped`).
pub(crate) fn tapped(outcome: &'static str, documents: u64) {
    counter!(TAP_DOCS, "outcome" => outcome).increment(documents);
}

/// A Kafka consumer's lag on one partition, as librdkafka reports it.
pub(crate) fn kafka_lag(client: &str, topic: &str, partition: i32, lag: i64) {
    gauge!(
        KAFKA_LAG,
        "client" => client.to_owned(),
        "topic" => topic.to_owned(),
        "partition" => partition.to_string()
    )
    .set(lag as f64);
}

/// The process's resident memory, read now (Linux; nothing elsewhere).
pub(crate) fn record_process_memory() {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return;
    };
    let Some(pages) = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
    else {
        return;
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = u64::try_from(page).unwrap_or(4096);
    gauge!(RESIDENT_BYTES).set((pages * page) as f64);
}

/// An HTTP server closed a connection at once, at its `max_connections`.
pub(crate) fn http_connection_refused() {
    counter!(HTTP_CONNECTIONS_REFUSED).increment(1);
}

/// A rate limit answered a request of `sender` (a tenant's name,
/// `operator` or `unknown`: bounded by the operator's config) with 429.
pub(crate) fn api_request_limited(sender: &str) {
    counter!(API_REQUESTS_LIMITED, "sender" => sender.to_owned()).increment(1);
}

/// A continuous run's process died and starts again.
pub(crate) fn run_restarted(tenant: &str) {
    counter!(RUN_RESTARTS, "tenant" => tenant.to_owned()).increment(1);
}

/// A run of this process: counted active while it lives, and by status
/// when it ends.
#[derive(Debug)]
pub(crate) struct RunMeter {
    tenant: String,
    active: Gauge,
}

impl RunMeter {
    pub(crate) fn start(tenant: Option<&str>) -> Self {
        let tenant = tenant.unwrap_or("").to_owned();
        let active = gauge!(RUNS_ACTIVE, "tenant" => tenant.clone());
        active.increment(1.0);
        Self { tenant, active }
    }

    pub(crate) fn finish(self, status: &str) {
        counter!(RUNS, "tenant" => self.tenant.clone(), "status" => status.to_owned()).increment(1);
    }
}

impl Drop for RunMeter {
    fn drop(&mut self) {
        self.active.decrement(1.0);
    }
}

/// `plugin` (of `tenant`) looked up keys in the host's cache: `hits` were
/// kept, `misses` were not.
pub(crate) fn cache_lookups(plugin: &str, tenant: Option<&str>, hits: u64, misses: u64) {
    for (outcome, n) in [("hit", hits), ("miss", misses)] {
        counter!(
            CACHE_LOOKUPS,
            "plugin" => plugin.to_owned(),
            "tenant" => tenant.unwrap_or("").to_owned(),
            "outcome" => outcome
        )
        .increment(n);
    }
}

/// A call of `plugin` (of `tenant`) on the host's cache could not be served.
pub(crate) fn cache_failed(plugin: &str, tenant: Option<&str>) {
    counter!(
        CACHE_FAILURES,
        "plugin" => plugin.to_owned(),
        "tenant" => tenant.unwrap_or("").to_owned()
    )
    .increment(1);
}

/// `count` starts of a schedule of `tenant` came due: started, or skipped
/// (`outcome` says why; bounded by the code, never a schedule's id).
pub(crate) fn scheduled_starts(tenant: &str, outcome: &'static str, count: u64) {
    counter!(SCHEDULED_STARTS, "tenant" => tenant.to_owned(), "outcome" => outcome)
        .increment(count);
}

/// `lines` pushed to a run of `tenant` came out as `outcome`.
pub(crate) fn pushed_lines(tenant: &str, outcome: &'static str, lines: u64) {
    counter!(PUSHED_LINES, "tenant" => tenant.to_owned(), "outcome" => outcome).increment(lines);
}

/// A push of `tenant` was refused whole with HTTP `status`.
pub(crate) fn push_refused(tenant: &str, status: u16) {
    counter!(PUSHES_REFUSED, "tenant" => tenant.to_owned(), "status" => status.to_string())
        .increment(1);
}
