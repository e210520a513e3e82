//! A run: every connector of a config, one after the other, each through its
//! pipeline's workers into the indexer, with publisher accounting deciding
//! when each connector is complete.
//!
//! The rules, from the guide's error scenarios: documents fail one at a time
//! and the run goes on; structural errors (config, a stage or indexer that
//! cannot start, a connector lifecycle error, a fatal plugin error, a
//! timeout) stop the run, and later connectors do not start.

mod dead_letters;
mod indexer;
mod publisher;
mod replay;
mod retry;
mod serve;
mod throttle;
mod watch;
mod worker;

use dead_letters::DeadLetterFile;
pub use dead_letters::{DeadLetter, read_dead_letters};

pub use serve::Shutdown;
pub use throttle::Throttle;

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::config::{Config, ConfigError, ConfigErrors, ConnectorConfig};
use crate::document::Document;
use crate::messenger::{MessengerFactory, MessengerParts, Polled, PublisherMessenger};
use crate::plugin::{
    ConnectorInstance, ConnectorPlugin, IndexerPlugin, InstancePolicy, PluginError, PluginRuntime,
    PluginSpec, PoolOptions, RuntimeOptions, StagePlugin, default_cache_dir,
};
use crate::telemetry::RunStats;
use crate::telemetry::meters::{IndexerMeters, PipelineMeters, Scope};

use indexer::IndexerLoop;
use publisher::{Abort, Accounting, Publish};
use worker::{StageSlot, Worker};

/// How long the runner sleeps when no event is waiting. It bounds how late
/// completion is noticed, not throughput: events queue up meanwhile.
const EVENT_POLL: Duration = Duration::from_millis(10);

/// Events counted under one lock of the accounting.
const EVENT_CHUNK: usize = 256;

/// How the error of a connector stopped by an [`Interrupt`] begins.
const INTERRUPTED: &str = "interrupted";

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Every connector completed and every document was indexed or dropped.
    Success,
    /// Every connector completed, but some documents failed.
    PartialSuccess,
    /// A connector failed, or the run stalled or timed out.
    Failure,
    /// The run was asked to stop (SIGINT/SIGTERM) before it completed.
    Interrupted,
}

impl RunStatus {
    /// The process exit code for this status: 0, 3, 1 or 130.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::PartialSuccess => 3,
            Self::Failure => 1,
            Self::Interrupted => 130,
        }
    }

    /// The status as the metrics and the control plane name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::PartialSuccess => "partial_success",
            Self::Failure => "failure",
            Self::Interrupted => "interrupted",
        }
    }
}

/// Asks a run to stop gracefully: the connector is stopped, documents in
/// flight get `runner.grace_period` to finish, later connectors are
/// skipped, and the run ends [`RunStatus::Interrupted`]. Clone it into a
/// signal handler.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<std::sync::atomic::AtomicBool>);

impl Interrupt {
    /// Ask the run to stop; true the first time.
    pub fn trigger(&self) -> bool {
        !self.0.swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    pub fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Pauses a run, or a serving process, and resumes it: while paused,
/// connectors wait to publish and workers poll nothing; what is in flight
/// finishes (indexers go on with what workers handed them), and the time
/// paused does not count toward stall detection. Clone it into a signal
/// handler.
#[derive(Debug, Clone, Default)]
pub struct Pause(Arc<std::sync::atomic::AtomicBool>);

impl Pause {
    /// How often a paused thread looks whether it may go on.
    const TICK: Duration = Duration::from_millis(20);

    /// Pause; true when it was running.
    pub fn pause(&self) -> bool {
        let was = self.0.swap(true, std::sync::atomic::Ordering::SeqCst);
        if !was {
            tracing::warn!("paused: nothing new is published or processed until resumed");
        }
        !was
    }

    /// Resume; true when it was paused.
    pub fn resume(&self) -> bool {
        let was = self.0.swap(false, std::sync::atomic::Ordering::SeqCst);
        if was {
            tracing::info!("resumed");
        }
        was
    }

    pub fn is_paused(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Wait while paused, until `stop` says to give up (then false).
    pub(crate) fn wait(&self, stop: impl Fn() -> bool) -> bool {
        while self.is_paused() {
            if stop() {
                return false;
            }
            thread::sleep(Self::TICK);
        }
        true
    }
}

/// What one connector did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorResult {
    pub name: String,
    pub pipeline: String,
    /// Documents the connector published.
    pub published: u64,
    /// Child documents stages made.
    pub created: u64,
    /// Documents indexed.
    pub succeeded: u64,
    pub failed: u64,
    pub dropped: u64,
    /// Terminal events for documents already done (at-least-once
    /// redelivery): not counted above.
    pub duplicates: u64,
    pub elapsed: Duration,
    /// Why the connector failed; `None` when it completed.
    pub error: Option<String>,
    /// The run was interrupted while this connector ran.
    pub interrupted: bool,
    /// The connector did not run because an earlier one failed.
    pub skipped: bool,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    pub run_id: String,
    pub connectors: Vec<ConnectorResult>,
    /// What each stage did (in this process: local mode), for tuning.
    pub stages: Vec<crate::telemetry::StageSummary>,
    /// CPU time of the connector, worker and indexer threads in this process.
    pub cpu: crate::telemetry::CpuSummary,
    pub elapsed: Duration,
}

impl RunResult {
    pub fn status(&self) -> RunStatus {
        if self.connectors.iter().any(|c| c.interrupted) {
            RunStatus::Interrupted
        } else if self
            .connectors
            .iter()
            .any(|c| c.error.is_some() || c.skipped)
        {
            RunStatus::Failure
        } else if self.connectors.iter().any(|c| c.failed > 0) {
            RunStatus::PartialSuccess
        } else {
            RunStatus::Success
        }
    }
}

/// Every plugin of a config, loaded and with its config checked.
#[derive(Debug)]
pub struct LoadedPlugins {
    connectors: HashMap<String, ConnectorPlugin>,
    pipelines: HashMap<String, Vec<StagePlugin>>,
    /// Keyed by where the indexer sits in the config (`indexer`, `pipelines.p.indexer`).
    indexers: HashMap<String, IndexerPlugin>,
}

/// One worker's stage instances for `pipeline`, every one started.
pub(crate) fn start_stages(
    plugins: &LoadedPlugins,
    scope: &Scope,
) -> Result<Vec<StageSlot>, String> {
    let pipeline: &str = scope.pipeline();
    plugins
        .pipelines
        .get(pipeline)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|p| p.instantiate().map(|i| StageSlot::new(scope, p.name(), i)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("error starting workers for pipeline `{pipeline}`: {e}"))
}

/// An indexer plugin instance that started and connected.
pub(crate) struct StartedIndexer {
    plugin: Arc<str>,
    scope: Scope,
    instance: crate::plugin::IndexerInstance,
    config: crate::config::IndexerConfig,
}

impl StartedIndexer {
    pub(crate) fn into_loop(
        self,
        pipeline: Arc<str>,
        messenger: Box<dyn crate::messenger::IndexerMessenger>,
        stats: Arc<RunStats>,
        abort: Abort,
        stop_retrying: Abort,
    ) -> IndexerLoop {
        IndexerLoop {
            pipeline,
            meters: IndexerMeters::new(&self.scope, &self.plugin),
            scope: self.scope,
            plugin: self.plugin,
            instance: self.instance,
            messenger,
            config: self.config,
            stats,
            abort,
            stop_retrying,
            abandoned: false,
            dead_letters: None,
        }
    }
}

/// Where a connector run's documents come from.
pub(crate) enum Source {
    /// The config entry's connector plugin.
    Plugin,
    /// Documents read back (`weir replay`).
    Documents(Vec<Document>),
}

/// A [`Source`], ready.
enum Started {
    Plugin(Box<ConnectorInstance>),
    Documents(Vec<Document>),
}

/// What one connector's lifecycle steps share.
#[derive(Clone, Copy)]
struct ConnectorRun<'a> {
    config: &'a ConnectorConfig,
    run_id: &'a str,
    publisher: &'a Arc<dyn PublisherMessenger>,
    accounting: &'a Arc<Accounting>,
    abort: &'a Abort,
    /// Workers and indexers are other processes (Kafka mode).
    remote: bool,
}

/// Runs a config.
pub struct Runner {
    config: Config,
    runtime: PluginRuntime,
    messengers: Arc<dyn MessengerFactory>,
    stats: Arc<RunStats>,
    interrupt: Interrupt,
    pause: Pause,
    throttle: Option<Arc<Throttle>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").finish_non_exhaustive()
    }
}

fn config_error(location: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        location: location.into(),
        message: message.into(),
    }
}

/// The plugin runtime a run of `config` needs: its component cache, and
/// a pool of pre-reserved instance slots when a plugin wants fresh instances.
pub fn runtime_for(config: &Config) -> anyhow::Result<PluginRuntime> {
    // Fresh instances per document come from a pool of pre-reserved slots:
    // enough for every instance the process may hold, twice over.
    let fresh = config
        .plugins()
        .any(|at| at.spec.instance == InstancePolicy::Fresh);
    let pool = fresh.then(|| {
        let stages: usize = config.pipelines.iter().map(|p| p.stages.len() + 1).sum();
        let instances = 2 * (config.worker.threads * stages + config.connectors.len() + 4);
        PoolOptions {
            instances: u32::try_from(instances).unwrap_or(u32::MAX),
            max_memory_mib: config
                .plugins()
                .map(|at| at.spec.limits.memory_mib())
                .max()
                .unwrap_or(256),
        }
    });
    PluginRuntime::new(RuntimeOptions {
        cache_dir: config.runner.cache_dir.clone().or_else(default_cache_dir),
        cache_max_bytes: config.runner.cache_max_mib.saturating_mul(1 << 20),
        pool,
        ..RuntimeOptions::default()
    })
    .map_err(|e| anyhow::anyhow!("cannot start the plugin runtime: {e:#}"))
}

/// A fresh run id: time-ordered, unique enough for topics and logs.
pub fn new_run_id() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{millis:x}-{:08x}", fastrand::u32(..))
}

impl Runner {
    pub fn new(
        config: Config,
        runtime: PluginRuntime,
        messengers: Arc<dyn MessengerFactory>,
    ) -> Self {
        Self {
            runtime,
            messengers,
            stats: Arc::default(),
            interrupt: Interrupt::default(),
            pause: Pause::default(),
            throttle: config
                .publisher
                .max_docs_per_second
                .map(|rate| Arc::new(Throttle::new(rate))),
            config,
        }
    }

    /// Publish at most as fast as `throttle` lets, shared with whatever
    /// else holds it (a tenant's quota over all its runs), instead of
    /// `publisher.max_docs_per_second`.
    pub fn with_throttle(mut self, throttle: Arc<Throttle>) -> Self {
        self.throttle = Some(throttle);
        self
    }

    /// What pauses and resumes this runner's runs and serving.
    pub fn pauser(&self) -> Pause {
        self.pause.clone()
    }

    /// The handle that interrupts this runner's runs (see [`Interrupt`]).
    pub fn interrupter(&self) -> Interrupt {
        self.interrupt.clone()
    }

    /// The tenant every connector of a run feeds, if they all feed one.
    fn tenant_of_run(&self, sources: &[(ConnectorConfig, Source)]) -> Option<&str> {
        let mut tenants = sources
            .iter()
            .map(|(c, _)| self.config.tenant_of(&c.pipeline));
        let first = tenants.next()??;
        tenants.all(|t| t == Some(first)).then_some(first)
    }

    /// The labels of `pipeline`'s metrics.
    pub(crate) fn scope(&self, pipeline: &str) -> Scope {
        Scope::new(pipeline, self.config.tenant_of(pipeline))
    }

    /// Live counts, for progress displays.
    pub fn stats(&self) -> Arc<RunStats> {
        Arc::clone(&self.stats)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Check the whole config, plugins included: every structural problem and
    /// every issue each plugin finds in its own settings, all at once.
    pub fn validate(&self) -> Result<LoadedPlugins, ConfigErrors> {
        let mut errors = self.config.check();
        let load_failed = |location: &str, e: PluginError| {
            config_error(format!("{location}.plugin"), e.to_string())
        };
        let mut check =
            |location: &str, issues: Result<Vec<crate::plugin::ConfigIssue>, PluginError>| {
                match issues {
                    Ok(issues) => errors.extend(issues.into_iter().map(|i| {
                        let path = if i.path.is_empty() {
                            format!("{location}.plugin.config")
                        } else {
                            format!("{location}.plugin.config.{}", i.path)
                        };
                        config_error(path, i.message)
                    })),
                    Err(e) => errors.push(load_failed(location, e)),
                }
            };
        let loadable = |spec: &PluginSpec| spec.path.is_file();

        let mut connectors = HashMap::new();
        for c in &self.config.connectors {
            let location = format!("connectors.{}", c.name);
            if !loadable(&c.plugin) {
                continue;
            }
            match self.runtime.load_connector(&c.name, &c.plugin) {
                Ok(plugin) => {
                    check(&location, plugin.check_config());
                    connectors.insert(c.name.clone(), plugin);
                }
                Err(e) => check(&location, Err(e)),
            }
        }
        let mut pipelines = HashMap::new();
        for p in &self.config.pipelines {
            let mut stages = Vec::new();
            for s in &p.stages {
                let location = format!("pipelines.{}.stages.{}", p.name, s.name);
                if !loadable(&s.plugin) {
                    continue;
                }
                match self.runtime.load_stage(&s.name, &s.plugin) {
                    Ok(plugin) => {
                        check(&location, plugin.check_config());
                        stages.push(plugin);
                    }
                    Err(e) => check(&location, Err(e)),
                }
            }
            pipelines.insert(p.name.clone(), stages);
        }
        let mut indexers = HashMap::new();
        let indexer_configs = self.config.indexers();
        let dead_letters = self
            .config
            .dead_letters
            .plugin
            .iter()
            .filter(|_| self.config.dead_letters.enabled)
            .map(|spec| ("dead_letters".to_owned(), spec));
        let indexer_specs = indexer_configs
            .map(|(location, indexer)| (location, &indexer.plugin))
            .chain(dead_letters);
        for (location, spec) in indexer_specs {
            if !loadable(spec) {
                continue;
            }
            match self.runtime.load_indexer(&location, spec) {
                Ok(plugin) => {
                    check(&location, plugin.check_config());
                    indexers.insert(location, plugin);
                }
                Err(e) => check(&location, Err(e)),
            }
        }
        if errors.is_empty() {
            Ok(LoadedPlugins {
                connectors,
                pipelines,
                indexers,
            })
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Validate, then run every connector in order.
    pub fn run(&self) -> Result<RunResult, ConfigErrors> {
        let plugins = self.validate()?;
        Ok(self.run_validated(&plugins, &new_run_id()))
    }

    /// Run every connector in order with already validated plugins.
    pub fn run_validated(&self, plugins: &LoadedPlugins, run_id: &str) -> RunResult {
        let sources = self
            .config
            .connectors
            .iter()
            .map(|c| (c.clone(), Source::Plugin))
            .collect();
        self.run_sources(plugins, run_id, sources)
    }

    /// Send dead letters through their pipelines again, as run `run_id`:
    /// one source per pipeline, in the order the pipelines first appear
    /// (`pipeline` sends every letter through that one instead).
    pub fn replay(
        &self,
        plugins: &LoadedPlugins,
        run_id: &str,
        letters: Vec<DeadLetter>,
        pipeline: Option<&str>,
    ) -> Result<RunResult, String> {
        let sources = replay::sources(&self.config, letters, pipeline)?;
        Ok(self.run_sources(plugins, run_id, sources))
    }

    fn run_sources(
        &self,
        plugins: &LoadedPlugins,
        run_id: &str,
        sources: Vec<(ConnectorConfig, Source)>,
    ) -> RunResult {
        let span = tracing::info_span!("run", run_id);
        let _entered = span.enter();
        let start = Instant::now();
        let meter = crate::telemetry::meters::RunMeter::start(self.tenant_of_run(&sources));
        tracing::info!(connectors = sources.len(), "run started");
        let mut results = Vec::new();
        let mut failed = false;
        // Where this process runs workers or indexers and its messengers keep
        // no failed documents (local mode), they go to a file.
        let dead_letters = (self.config.dead_letters.enabled
            && !self.messengers.keeps_dead_letters())
        .then(|| {
            let file = DeadLetterFile::new(self.config.dead_letters.path_for(run_id));
            Arc::new(match plugins.indexers.get("dead_letters") {
                Some(plugin) => file.with_plugin(plugin),
                None => file,
            })
        });
        for (connector, source) in sources {
            let connector = &connector;
            if failed || self.interrupt.is_set() {
                results.push(ConnectorResult {
                    name: connector.name.clone(),
                    pipeline: connector.pipeline.clone(),
                    published: 0,
                    created: 0,
                    succeeded: 0,
                    failed: 0,
                    dropped: 0,
                    duplicates: 0,
                    elapsed: Duration::ZERO,
                    error: None,
                    // Stopped before it started: the run was interrupted.
                    interrupted: self.interrupt.is_set(),
                    skipped: true,
                });
                continue;
            }
            let result =
                self.run_connector(connector, source, plugins, run_id, dead_letters.as_ref());
            if let Some(error) = &result.error {
                if result.interrupted {
                    tracing::warn!(connector = %connector.name, %error, "the run was interrupted");
                } else {
                    tracing::error!(connector = %connector.name, %error, "connector failed; the run stops");
                }
                failed = true;
            }
            results.push(result);
        }
        self.messengers.run_ended(run_id);
        let result = RunResult {
            run_id: run_id.to_owned(),
            connectors: results,
            stages: self.stats.stage_summaries(),
            cpu: self.stats.cpu(),
            elapsed: start.elapsed(),
        };
        tracing::info!(status = ?result.status(), elapsed = ?result.elapsed, "run ended");
        meter.finish(result.status().name());
        if let Some(letters) =
            dead_letters.filter(|_| result.connectors.iter().any(|c| c.failed > 0))
        {
            tracing::info!(path = %letters.path().display(), "the failed documents are in the dead-letter file: `weir replay` sends them again");
        }
        result
    }

    fn run_connector(
        &self,
        c: &ConnectorConfig,
        source: Source,
        plugins: &LoadedPlugins,
        run_id: &str,
        dead_letters: Option<&Arc<DeadLetterFile>>,
    ) -> ConnectorResult {
        let span = tracing::info_span!(
            "connector",
            connector = %c.name,
            pipeline = %c.pipeline,
            tenant = tracing::field::Empty,
        );
        if let Some(tenant) = self.config.tenant_of(&c.pipeline) {
            span.record("tenant", tenant);
        }
        let _entered = span.enter();
        let start = Instant::now();
        let accounting = Arc::new(Accounting::new(run_id));
        let error = self
            .drive_connector(c, source, plugins, run_id, &accounting, dead_letters)
            .err();
        let settled = accounting.settle();
        if settled.duplicates > 0 {
            tracing::info!(
                duplicates = settled.duplicates,
                "documents were reported done more than once (redelivered); each is counted once"
            );
        }
        if settled.foreign > 0 {
            tracing::warn!(
                events = settled.foreign,
                "events of other runs were set aside"
            );
        }
        let result = ConnectorResult {
            name: c.name.clone(),
            pipeline: c.pipeline.clone(),
            published: Accounting::get(&accounting.published),
            created: Accounting::get(&accounting.created),
            succeeded: Accounting::get(&accounting.succeeded),
            failed: Accounting::get(&accounting.failed),
            dropped: Accounting::get(&accounting.dropped),
            duplicates: settled.duplicates,
            elapsed: start.elapsed(),
            interrupted: self.interrupt.is_set()
                && error.as_deref().is_some_and(|e| e.starts_with(INTERRUPTED)),
            error,
            skipped: false,
        };
        tracing::info!(
            published = result.published,
            children = result.created,
            succeeded = result.succeeded,
            failed = result.failed,
            dropped = result.dropped,
            elapsed = ?result.elapsed,
            "connector finished"
        );
        result
    }

    /// Start the indexer and workers, run the connector's lifecycle, wait for
    /// its documents, and shut the pipeline down. `Err` is why it failed.
    #[allow(clippy::too_many_arguments)]
    fn drive_connector(
        &self,
        c: &ConnectorConfig,
        source: Source,
        plugins: &LoadedPlugins,
        run_id: &str,
        accounting: &Arc<Accounting>,
        dead_letters: Option<&Arc<DeadLetterFile>>,
    ) -> Result<(), String> {
        let threads = self.config.worker.threads;
        let instances = self
            .config
            .indexer_for(&c.pipeline)
            .map_or(1, |(_, indexer)| indexer.instances);
        let MessengerParts {
            publisher,
            workers: worker_messengers,
            indexers: indexer_messengers,
        } = self
            .messengers
            .create(&c.pipeline, threads, instances, run_id)
            .map_err(|e| {
                format!(
                    "cannot set up messengers for pipeline `{}`: {e}",
                    c.pipeline
                )
            })?;
        let publisher: Arc<dyn PublisherMessenger> = Arc::from(publisher);
        let remote = worker_messengers.is_empty() && indexer_messengers.is_empty();
        tracing::debug!("messengers ready");

        // Indexers first (where they run in this process): no document is
        // processed if one cannot connect.
        let count = indexer_messengers.len();
        let mut indexers = Vec::with_capacity(count);
        for (index, messenger) in indexer_messengers.into_iter().enumerate() {
            let started = self.start_indexer(plugins, &c.pipeline, (index, count))?;
            indexers.push((started, messenger));
        }
        // Then every worker's stages: a stage that cannot start stops the run.
        let mut workers = Vec::with_capacity(worker_messengers.len());
        for messenger in worker_messengers {
            workers.push((start_stages(plugins, &self.scope(&c.pipeline))?, messenger));
        }

        let mut source = match source {
            Source::Plugin => Started::Plugin(Box::new(
                plugins
                    .connectors
                    .get(&c.name)
                    .ok_or_else(|| format!("connector `{}` was not loaded", c.name))?
                    .instantiate()
                    .map_err(|e| format!("the connector could not start: {e}"))?,
            )),
            Source::Documents(docs) => Started::Documents(docs),
        };

        let abort = Abort::default();
        let pipeline: Arc<str> = Arc::from(c.pipeline.as_str());
        thread::scope(|scope| {
            let several = indexers.len() > 1;
            let indexer_threads: Vec<_> = indexers
                .into_iter()
                .enumerate()
                .map(|(i, (started, messenger))| {
                    let mut indexer_loop = started.into_loop(
                        Arc::clone(&pipeline),
                        messenger,
                        Arc::clone(&self.stats),
                        abort.clone(),
                        abort.clone(),
                    );
                    indexer_loop.dead_letters = dead_letters.cloned();
                    let name = if several {
                        format!("weir-indexer-{i}")
                    } else {
                        "weir-indexer".to_owned()
                    };
                    spawn_in_span(scope, &name, move || indexer_loop.run())
                })
                .collect();
            let worker_threads =
                self.spawn_workers(scope, &pipeline, workers, &abort, dead_letters);

            let run = ConnectorRun {
                config: c,
                run_id,
                publisher: &publisher,
                accounting,
                abort: &abort,
                remote,
            };
            let outcome = self.connector_lifecycle(&run, &mut source);
            if let Err(reason) = &outcome {
                abort.trigger(reason.clone());
            }
            // Closing the source lets workers drain and stop, then the indexer.
            // A failed run's workers and indexer stop on the abort instead;
            // the publisher stays open for the events they send until then
            // (a batch indexed as the run failed), so the summary counts
            // exactly what was indexed.
            let events = abort.is_set().then_some(publisher);
            for handle in worker_threads {
                if handle.join().is_err() {
                    abort.trigger("a worker thread panicked");
                }
            }
            for handle in indexer_threads {
                if handle.join().is_err() {
                    abort.trigger("an indexer thread panicked");
                }
            }
            if let Some(events) = events {
                while let Ok(Polled::Item(event)) = events.poll_event(Duration::ZERO) {
                    accounting.apply(&event);
                }
            }
            outcome.and_then(|()| abort.reason().map_or(Ok(()), |r| Err(r.to_owned())))
        })
    }

    /// A worker thread for each set of stage instances and its messenger.
    pub(crate) fn spawn_workers<'scope>(
        &self,
        scope: &'scope thread::Scope<'scope, '_>,
        pipeline: &Arc<str>,
        workers: Vec<(Vec<StageSlot>, Box<dyn crate::messenger::WorkerMessenger>)>,
        abort: &Abort,
        dead_letters: Option<&Arc<DeadLetterFile>>,
    ) -> Vec<thread::ScopedJoinHandle<'scope, ()>> {
        let retry = worker::StageRetry::new(&self.config.worker);
        workers
            .into_iter()
            .enumerate()
            .map(|(i, (mut stages, messenger))| {
                for slot in &mut stages {
                    slot.stats = self.stats.stage(pipeline, &slot.name);
                }
                let labels = self.scope(pipeline);
                let worker = Worker {
                    pipeline: Arc::clone(pipeline),
                    meters: PipelineMeters::new(&labels),
                    scope: labels,
                    stages,
                    messenger,
                    stats: Arc::clone(&self.stats),
                    abort: abort.clone(),
                    retry,
                    dead_letters: dead_letters.cloned(),
                    pause: self.pause.clone(),
                };
                spawn_in_span(scope, &format!("weir-worker-{i}"), move || worker.run())
            })
            .collect()
    }

    /// The indexer of `pipeline`, started and connected.
    pub(crate) fn start_indexer(
        &self,
        plugins: &LoadedPlugins,
        pipeline: &str,
        (index, count): (usize, usize),
    ) -> Result<StartedIndexer, String> {
        let (location, config) = self
            .config
            .indexer_for(pipeline)
            .ok_or_else(|| format!("pipeline `{pipeline}` has no indexer"))?;
        let plugin = plugins
            .indexers
            .get(&location)
            .ok_or_else(|| format!("indexer `{location}` was not loaded"))?;
        let mut instance = plugin
            .instantiate_numbered(index, count)
            .map_err(|e| format!("the indexer could not start: {e}"))?;
        if let Err(e) = instance.validate_connection() {
            if let Err(close) = instance.close() {
                tracing::warn!(error = %close, "indexer close failed");
            }
            return Err(format!("the indexer could not connect: {e}"));
        }
        Ok(StartedIndexer {
            plugin: Arc::from(plugin.name()),
            scope: self.scope(pipeline),
            instance,
            config: config.clone(),
        })
    }

    /// pre-execute, execute (while counting events), post-execute, close;
    /// documents read back are only published.
    fn connector_lifecycle(
        &self,
        run: &ConnectorRun<'_>,
        source: &mut Started,
    ) -> Result<(), String> {
        let connector = match source {
            Started::Plugin(connector) => connector,
            Started::Documents(docs) => {
                let cancel = crate::plugin::Cancel::default();
                let docs = std::mem::take(docs);
                let run_id = run.run_id;
                let stop = cancel.clone();
                return self.execute_and_wait(run, &cancel, move |sink, timeout| {
                    replay::publish(docs, run_id, sink, timeout, &stop)
                });
            }
        };
        let result = connector
            .pre_execute(run.run_id)
            .map_err(|e| format!("pre-execute failed: {e}"))
            .and_then(|()| {
                let cancel = connector
                    .canceller()
                    .map_err(|e| format!("the connector could not start: {e}"))?;
                let run_id = run.run_id;
                self.execute_and_wait(run, &cancel, |sink, timeout| {
                    connector
                        .execute(run_id, sink, timeout)
                        .map_err(|e| format!("execute failed: {e}"))
                })
            })
            .and_then(|()| {
                connector
                    .post_execute()
                    .map_err(|e| format!("post-execute failed: {e}"))
            });
        let closed = connector.close().map_err(|e| format!("close failed: {e}"));
        result.and(closed)
    }

    /// Run `execute` on its own thread and count events until every published
    /// document is done, the connector fails, the run aborts, stalls or is
    /// interrupted (`cancel` then stops it), or time runs out.
    fn execute_and_wait(
        &self,
        run: &ConnectorRun<'_>,
        cancel: &crate::plugin::Cancel,
        execute: impl FnOnce(Box<dyn crate::plugin::PublishSink>, Duration) -> Result<(), String> + Send,
    ) -> Result<(), String> {
        let ConnectorRun {
            config: c,
            run_id: _,
            publisher,
            accounting,
            abort,
            remote,
        } = *run;
        let timeout = self.config.runner.connector_timeout;
        tracing::debug!("connector executing");
        let scope = self.scope(&c.pipeline);
        let sink = Publish {
            messenger: Arc::clone(publisher),
            accounting: Arc::clone(accounting),
            stats: Arc::clone(&self.stats),
            abort: abort.clone(),
            interrupt: self.interrupt.clone(),
            pause: self.pause.clone(),
            published: scope.published(&c.name),
            scope,
            throttle: self.throttle.clone(),
        };
        // The runner's own deadline check reports a connector timeout; the
        // connector's deadline comes a little later so it never wins that race.
        let execute_timeout = c
            .plugin
            .limits
            .execute_timeout()
            .min(timeout + Duration::from_secs(1));
        thread::scope(|scope| {
            let stats = &self.stats;
            let mut execution = Some(spawn_in_span(scope, "weir-connector", move || {
                let _cpu = crate::telemetry::ThreadCpu::count_into(&stats.connector_cpu_nanos);
                execute(Box::new(sink), execute_timeout)
            }));
            let mut executed: Option<Result<(), String>> = None;
            let mut watch = watch::Watch::new(&self.config.runner, &c.pipeline, &self.stats);
            let pending = self.scope(&c.pipeline).pending();
            let mut events = Vec::with_capacity(EVENT_CHUNK);
            loop {
                // Drain what is there, then sleep: waiting on the queue instead
                // would wake this thread once per event.
                let mut drained = 0usize;
                loop {
                    match publisher.poll_event(Duration::ZERO) {
                        Ok(Polled::Item(event)) => {
                            events.push(event);
                            if events.len() == EVENT_CHUNK {
                                drained += events.len();
                                accounting.apply_all(&events);
                                events.clear();
                            }
                        }
                        Ok(Polled::Idle | Polled::Closed) => break,
                        Err(e) => {
                            abort.trigger(format!("cannot read events: {e}"));
                            break;
                        }
                    }
                }
                drained += events.len();
                accounting.apply_all(&events);
                events.clear();
                if drained == 0 {
                    thread::sleep(EVENT_POLL);
                } else {
                    watch.progressed();
                }
                if self.pause.is_paused() {
                    // Time paused is not time stalled.
                    watch.progressed();
                }
                if remote {
                    watch.count_remote(accounting);
                }
                if let Some(handle) = execution.take_if(|h| h.is_finished()) {
                    executed = Some(match handle.join() {
                        Ok(result) => result,
                        Err(_) => Err("the connector thread panicked".into()),
                    });
                }
                if let Some(reason) = abort.reason() {
                    return Err(reason.to_owned());
                }
                // Complete before an interrupt was seen: complete.
                if let Some(Ok(())) = &executed
                    && accounting.pending() == 0
                    && !watch.was_interrupted()
                {
                    return Ok(());
                }
                if self.interrupt.is_set() {
                    // The connector stops; what is in flight gets the grace period.
                    if watch.interrupted(cancel, accounting.pending()) {
                        let pending = watch::pending_suffix(accounting);
                        return Err(format!("{INTERRUPTED}{pending}"));
                    }
                    continue;
                }
                if let Some(Err(e)) = &executed {
                    return Err(e.clone());
                }
                if watch.started.elapsed() >= timeout {
                    let reason = format!(
                        "connector timeout of {timeout:?} reached{}",
                        watch::pending_suffix(accounting)
                    );
                    abort.trigger(reason.clone());
                    return Err(reason);
                }
                if let Some(reason) = watch.stalled(publisher.as_ref(), accounting) {
                    abort.trigger(reason.clone());
                    return Err(reason);
                }
                let now_pending = accounting.pending();
                pending.set(now_pending as f64);
                watch.log_throughput(now_pending);
            }
        })
    }
}

/// Spawn a named scoped thread that runs `f` inside the caller's tracing span.
fn spawn_in_span<'scope, T: Send + 'scope>(
    scope: &'scope thread::Scope<'scope, '_>,
    name: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> thread::ScopedJoinHandle<'scope, T> {
    let span = tracing::Span::current();
    thread::Builder::new()
        .name(name.to_owned())
        .spawn_scoped(scope, move || span.in_scope(f))
        .expect("the OS refused to start a thread")
}
