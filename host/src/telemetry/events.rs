//! Telemetry as typed events: each struct is one thing that happened, and
//! its `emit()` logs it and counts it together, so a log line and its
//! counters cannot drift apart (as Vector's `internal_events`). Metric
//! labels stay bounded: a document id goes into the log line, never into a
//! metric.

use super::RunStats;
use super::meters::{self, Scope};
use crate::core::limit::Limit;
use crate::core::trap::TrapCause;

/// Where a document failed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailedIn {
    /// A stage of the pipeline failed it (its own error, or a trap).
    Pipeline,
    /// The indexer's backend refused it.
    Indexer,
    /// The host refused it before any stage saw it (the pipeline's queue
    /// would not take it).
    Publisher,
}

/// A document failed for good: counted in the run's live counts and in
/// `weir_docs_failed_total`, and logged with its id.
#[derive(Debug)]
pub(crate) struct DocumentFailed<'a> {
    pub(crate) scope: &'a Scope,
    pub(crate) stats: &'a RunStats,
    pub(crate) place: FailedIn,
    /// The plugin that failed it (`weir` for the host's own refusals).
    pub(crate) plugin: &'a str,
    pub(crate) doc_id: &'a str,
    pub(crate) run_id: Option<&'a str>,
    pub(crate) message: &'a str,
}

impl DocumentFailed<'_> {
    pub(crate) fn emit(self) {
        RunStats::add(&self.stats.failed, 1);
        self.scope.document_failed(self.plugin);
        let Self {
            plugin,
            doc_id,
            run_id,
            message,
            ..
        } = self;
        let doc_id = &*crate::core::text::for_log(doc_id);
        match self.place {
            FailedIn::Pipeline => {
                tracing::warn!(
                    doc_id,
                    run_id,
                    plugin,
                    message,
                    "document failed in the pipeline"
                );
            }
            FailedIn::Indexer => {
                tracing::warn!(
                    doc_id,
                    run_id,
                    plugin,
                    message,
                    "document failed in the indexer"
                );
            }
            FailedIn::Publisher => {
                tracing::warn!(
                    doc_id,
                    run_id,
                    reason = message,
                    "document failed: the pipeline refused it"
                );
            }
        }
    }
}

/// A call into a plugin trapped: its instance is replaced. Counted by
/// cause in `weir_plugin_traps_total`, and as a limit hit when a limit
/// stopped it.
#[derive(Debug)]
pub(crate) struct PluginTrapped<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) cause: &'a TrapCause,
}

impl PluginTrapped<'_> {
    pub(crate) fn emit(self) {
        tracing::warn!(plugin = %self.plugin, cause = %self.cause, "plugin trapped; its instance will be replaced");
        meters::plugin_trapped(self.plugin, self.tenant, self.cause);
    }
}

/// A plugin wrote more log lines than `limits.log_lines_per_second` lets
/// through during one call: the rest were dropped, and the limit counted as hit.
#[derive(Debug)]
pub(crate) struct LogLinesDropped<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) dropped: u64,
    pub(crate) per_second: u32,
}

impl LogLinesDropped<'_> {
    pub(crate) fn emit(self) {
        tracing::warn!(
            plugin = %self.plugin,
            dropped = self.dropped,
            limit = self.per_second,
            "log lines dropped: over the plugin's limits.log_lines_per_second"
        );
        meters::limit_hit(self.plugin, self.tenant, Limit::LogLinesPerSecond);
    }
}

/// A plugin's outgoing HTTP request was refused by its grants: counted in
/// `weir_http_requests_refused_total`, and logged with why and what to
/// grant when the plugin's log rate has room (a plugin makes as many
/// requests as it likes, so it must not flood the log with refusals).
#[derive(Debug)]
pub(crate) struct HttpRefused<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    /// The bounded label of the reason.
    pub(crate) reason: &'static str,
    /// Why, and what to grant, in words.
    pub(crate) why: &'a str,
    /// Whether to log the line: the plugin's log rate has room for it.
    pub(crate) log: bool,
}

impl HttpRefused<'_> {
    pub(crate) fn emit(self) {
        if self.log {
            tracing::warn!(
                plugin = %self.plugin,
                host = %self.host,
                port = self.port,
                "outgoing HTTP refused: {}",
                self.why
            );
        }
        meters::http_refused(self.plugin, self.tenant, self.reason);
    }
}

/// The host's cache could not serve a plugin's call (a broken or locked
/// file, a full disk): the plugin goes on without it. Counted in
/// `weir_cache_failures_total` every time; logged as a warning when `warn`
/// (the cache logs the first failure and then at most one a minute).
#[derive(Debug)]
pub(crate) struct CacheFailed<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) path: &'a std::path::Path,
    pub(crate) error: &'a str,
    pub(crate) warn: bool,
}

impl CacheFailed<'_> {
    pub(crate) fn emit(self) {
        if self.warn {
            tracing::warn!(
                plugin = %self.plugin,
                path = %self.path.display(),
                error = %self.error,
                "the cache cannot be used: going on without it (what it would have kept is computed again)"
            );
        }
        meters::cache_failed(self.plugin, self.tenant);
    }
}
