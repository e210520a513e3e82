//! Telemetry as typed events: each struct is one thing that happened, and
//! its `emit()` logs it and counts it together, so a log line and its
//! counters cannot drift apart (as Vector's `internal_events`). Metric
//! labels stay bounded: a document id goes into the log line, never into a
//! metric.

use super::RunStats;
use super::meters::{self, Scope};
use crate::core::limit::Limit;
use crate::core::trap::TrapCause;

mod serve;
pub(crate) use serve::{PushOutcome, Pushed, ScheduleStart, Scheduled};

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
            "log lines dropped: over the plugin's {}",
            Limit::LogLinesPerSecond
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

/// A plugin's component is compiled to native code: it was in no cache
/// (the first load of this build, on this machine). Said before, with a
/// rough time from its size, since a large one (a Python or JavaScript
/// plugin) takes seconds to a minute; and again when done.
#[derive(Debug)]
pub(crate) struct ComponentCompiling<'a> {
    pub(crate) path: &'a std::path::Path,
    pub(crate) bytes: usize,
}

/// About how fast components compile, in bytes a second: measured on 2
/// busy cores (a 19 MB Python component took 5 s). Only for the estimate.
const COMPILED_PER_SECOND: usize = 4 << 20;

impl ComponentCompiling<'_> {
    /// Say it (a component under [`SAID_FROM`] bytes, which compiles in
    /// well under a second, only in the debug log); the returned guard says
    /// how long it took when dropped.
    pub(crate) fn emit(self) -> ComponentCompiled {
        let said = self.bytes >= SAID_FROM;
        let mib = self.bytes as f64 / f64::from(1 << 20);
        let seconds = self.bytes.div_ceil(COMPILED_PER_SECOND);
        let path = self.path.display();
        if said {
            tracing::info!(
                "compiling {path} ({mib:.1} MiB) to native code: the first time only, ~{seconds} s; cached for the next run"
            );
        } else {
            tracing::debug!("compiling {path} ({mib:.1} MiB) to native code");
        }
        ComponentCompiled {
            path: path.to_string(),
            said,
            started: std::time::Instant::now(),
        }
    }
}

/// Components from this size on are said to compile (see [`ComponentCompiling`]).
const SAID_FROM: usize = 1 << 20;

/// A component's compile is over (see [`ComponentCompiling`]).
#[derive(Debug)]
pub(crate) struct ComponentCompiled {
    path: String,
    said: bool,
    started: std::time::Instant,
}

impl Drop for ComponentCompiled {
    fn drop(&mut self) {
        let seconds = self.started.elapsed().as_secs_f64();
        if self.said {
            tracing::info!("compiled {} in {seconds:.1} s", self.path);
        } else {
            tracing::debug!("compiled {} in {seconds:.1} s", self.path);
        }
    }
}

/// Why something failed, as an event carries it: shown in the log, and
/// debuggable like the event.
pub(crate) trait Why: std::fmt::Display + std::fmt::Debug {}

impl<T: std::fmt::Display + std::fmt::Debug + ?Sized> Why for T {}

/// What a config reload came to, as [`ConfigReloaded`] tells it.
#[derive(Debug)]
pub(crate) enum ReloadOutcome<'a> {
    /// Nothing the workers run changed.
    Unchanged,
    /// Generation `generation` was published for `pipelines`; `switched` of
    /// the `workers` took it up within the wait.
    Applied {
        generation: u64,
        pipelines: &'a [String],
        workers: usize,
        switched: usize,
    },
    /// The reload was refused (an invalid config, or one that needs a
    /// restart): the old config goes on.
    Refused(&'a dyn Why),
}

/// A process's runner took up a config, or refused it (`weir run` on
/// SIGHUP and `--watch`, a run's process of `weir serve`): counted by
/// outcome in `weir_config_reloads_total`, and logged.
#[derive(Debug)]
pub(crate) struct ConfigReloaded<'a> {
    pub(crate) outcome: ReloadOutcome<'a>,
}

impl ConfigReloaded<'_> {
    pub(crate) fn emit(self) {
        match self.outcome {
            ReloadOutcome::Unchanged => {
                meters::config_reloaded("unchanged");
                tracing::info!("config reload: nothing the workers run changed");
            }
            ReloadOutcome::Applied {
                generation,
                pipelines,
                workers,
                switched,
            } => {
                meters::config_reloaded("applied");
                tracing::info!(generation, pipelines = %pipelines.join(","), workers, switched, "config reloaded: new documents run on the new stages");
            }
            ReloadOutcome::Refused(why) => {
                meters::config_reloaded("refused");
                tracing::error!("config reload refused: {why}");
            }
        }
    }
}

/// `weir serve` reloaded one of its runs, or refused to: logged with the
/// run and its tenant. Counted where the run's runner took the reload up
/// ([`ConfigReloaded`], in the run's own process), so not again here.
#[derive(Debug)]
pub(crate) struct RunReloaded<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) tenant: &'a str,
    /// What the reload came to, or why it was refused.
    pub(crate) outcome: Result<&'a dyn std::fmt::Debug, &'a dyn Why>,
}

impl RunReloaded<'_> {
    pub(crate) fn emit(self) {
        let Self { run_id, tenant, .. } = self;
        match self.outcome {
            Ok(outcome) => tracing::info!(run_id, tenant, ?outcome, "run reloaded"),
            Err(error) => tracing::warn!(
                run_id,
                tenant,
                %error,
                "run reload refused: its stages go on"
            ),
        }
    }
}

/// A worker of a pipeline took up a generation of reloaded stages (the
/// `weir_stages_generation` gauge; logged when it started new instances),
/// or could not start them and goes on with the ones it had (logged).
#[derive(Debug)]
pub(crate) struct StagesSwitched<'a> {
    pub(crate) scope: &'a Scope,
    pub(crate) generation: u64,
    /// It started new instances (its pipeline's stages changed).
    pub(crate) started: bool,
    /// Why the new stages could not start, when they could not.
    pub(crate) failed: Option<&'a dyn Why>,
}

impl StagesSwitched<'_> {
    pub(crate) fn emit(self) {
        let generation = self.generation;
        match self.failed {
            None => {
                if self.started {
                    tracing::info!(generation, "worker switched to the reloaded stages");
                }
                self.scope.stages_generation(generation);
            }
            Some(error) => tracing::error!(
                generation,
                %error,
                "the reloaded stages could not start; this worker goes on with the old ones"
            ),
        }
    }
}

/// How a shadow stage's output compared with the live stage's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shadowed {
    /// The same output.
    Same,
    /// A different output.
    Differs,
    /// The shadow failed where the live stage did not, or differently.
    Failed,
}

impl Shadowed {
    fn label(self) -> &'static str {
        match self {
            Self::Same => "same",
            Self::Differs => "differs",
            Self::Failed => "failed",
        }
    }
}

/// What the log says of a differing document of a shadow that has no
/// report file (it logs [`LOGGED`](crate::core) lines at most).
#[derive(Debug, Clone, Copy)]
pub(crate) enum ShadowLog<'a> {
    /// Nothing: the difference went to the report file, or past the bound.
    Nothing,
    /// The difference's line (bounded by the caller).
    Line(&'a str),
    /// That later differences are counted only.
    Bounded,
}

/// A shadow stage ran on a document: counted by outcome in
/// `weir_shadow_documents_total`, and a differing one logged as `log` says.
#[derive(Debug)]
pub(crate) struct ShadowCompared<'a> {
    pub(crate) scope: &'a Scope,
    pub(crate) stage: &'a str,
    pub(crate) outcome: Shadowed,
    pub(crate) log: ShadowLog<'a>,
}

impl ShadowCompared<'_> {
    pub(crate) fn emit(self) {
        self.scope.shadowed(self.stage, self.outcome.label());
        let stage = self.stage;
        match self.log {
            ShadowLog::Nothing => {}
            ShadowLog::Line(differences) => {
                tracing::warn!(
                    stage,
                    differences,
                    "the shadow's output differs from the live stage's"
                );
            }
            ShadowLog::Bounded => tracing::warn!(
                stage,
                "the shadow differs on more documents: counted in weir_shadow_documents_total, not logged (give it a `report` file)"
            ),
        }
    }
}

/// A shadow stage stopped working in a worker (a fatal error): it runs no
/// more there, and the live stage goes on (logged).
#[derive(Debug)]
pub(crate) struct ShadowStopped<'a> {
    pub(crate) stage: &'a str,
    pub(crate) error: &'a dyn Why,
}

impl ShadowStopped<'_> {
    pub(crate) fn emit(self) {
        let Self { stage, error } = self;
        tracing::warn!(stage, %error, "the shadow stopped working: it runs no more in this worker");
    }
}

/// What became of a document offered to a tap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tapped {
    /// Sent to the tap's reader.
    Sent,
    /// Dropped: the reader is behind (workers never wait for a tap).
    Dropped,
}

/// A tap took a document, or dropped it for a slow reader: counted in
/// `weir_tap_documents_total` (never logged: a tap sees every document).
#[derive(Debug)]
pub(crate) struct TapOffered {
    pub(crate) outcome: Tapped,
}

impl TapOffered {
    pub(crate) fn emit(self) {
        meters::tapped(
            match self.outcome {
                Tapped::Sent => "sent",
                Tapped::Dropped => "dropped",
            },
            1,
        );
    }
}

/// A tap was refused: the process holds its most open taps already
/// (logged at debug: the reader is told, and may ask again).
#[derive(Debug)]
pub(crate) struct TapRefused {
    pub(crate) open: usize,
}

impl TapRefused {
    pub(crate) fn emit(self) {
        tracing::debug!(
            open = self.open,
            "tap refused: the process holds its most open taps"
        );
    }
}

/// A continuous connector's report, every `runner.report_every`: what it
/// has done so far and how fast over the period, logged as one line.
#[derive(Debug)]
pub(crate) struct ConnectorReported<'a> {
    pub(crate) connector: &'a str,
    pub(crate) pipeline: &'a str,
    pub(crate) running: std::time::Duration,
    pub(crate) published: u64,
    pub(crate) indexed: u64,
    pub(crate) failed: u64,
    pub(crate) dropped: u64,
    pub(crate) pending: usize,
    pub(crate) duplicates: u64,
    pub(crate) published_per_second: f64,
    pub(crate) indexed_per_second: f64,
    /// Entries the accounting holds aside (bounded by its horizon).
    pub(crate) held_aside: usize,
}

impl ConnectorReported<'_> {
    pub(crate) fn emit(self) {
        let Self {
            connector,
            pipeline,
            published,
            indexed,
            failed,
            dropped,
            pending,
            duplicates,
            held_aside,
            ..
        } = self;
        tracing::info!(
            connector,
            pipeline,
            published,
            indexed,
            failed,
            dropped,
            pending,
            duplicates,
            held_aside,
            "continuous connector `{connector}` after {}: {published} published ({:.1}/s), {indexed} indexed ({:.1}/s), {failed} failed, {dropped} dropped, {pending} pending, {duplicates} duplicates",
            humantime::format_duration(std::time::Duration::from_secs(self.running.as_secs())),
            self.published_per_second,
            self.indexed_per_second,
        );
    }
}

/// `weir serve` started a continuous run's process again after it died:
/// counted in `weir_run_restarts_total` per tenant, and logged.
#[derive(Debug)]
pub(crate) struct RunRestarting<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) tenant: &'a str,
    /// How its last process ended.
    pub(crate) exit: &'a str,
    /// Its restarts so far, this one included.
    pub(crate) restarts: u32,
    pub(crate) backoff: std::time::Duration,
}

impl RunRestarting<'_> {
    pub(crate) fn emit(self) {
        let Self {
            run_id,
            tenant,
            exit,
            restarts,
            backoff,
        } = self;
        meters::run_restarted(tenant);
        tracing::warn!(
            run_id,
            tenant,
            exit,
            restarts,
            ?backoff,
            "a continuous run's process died: it starts again after its backoff"
        );
    }
}
