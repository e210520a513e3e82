//! A run: every connector of a config, one after the other, each through its
//! pipeline's workers into the indexer, with publisher accounting deciding
//! when each connector is complete.
//!
//! The rules, from the guide's error scenarios: documents fail one at a time
//! and the run goes on; structural errors (config, a stage or indexer that
//! cannot start, a connector lifecycle error, a fatal plugin error, a
//! timeout) stop the run, and later connectors do not start.

mod accounting;
mod cases;
mod connector;
mod continuous;
mod dead_letters;
mod deliveries;
mod family;
mod guard;
mod indexer;
mod outcome;
mod pipeline;
mod publisher;
mod reload;
mod replay;
mod retry;
mod serve;
mod shadow;
mod shadow_report;
mod stages;
mod state;
mod stop;
pub mod sync;
mod sync_state;
mod throttle;
pub mod trace;
mod validate;
mod watch;
mod worker;

pub use crate::telemetry::tap::TapEnd;
pub use crate::telemetry::{CpuSummary, Expected, RunStats, StageSummary, StatsSnapshot};
pub use cases::{Span, stage_range};
use dead_letters::DeadLetterFile;
pub use dead_letters::{DeadLetter, read_dead_letters};
pub use guard::{MIN_DELETES, MassDelete};
pub use outcome::{ConnectorResult, DeadLettersAt, RunResult, RunStatus};
pub use reload::{ReloadRefused, Reloaded};
pub use serve::Shutdown;
pub use state::SqliteStates;
pub use stop::{Interrupt, Pause, StopReason};
pub use sync_state::{
    DEFAULT_SHOWN_KEYS, MAX_SHOWN_KEYS, ShownKey, StateInspectError, StateQuery, SyncOf, SyncReset,
    SyncState,
};
pub use throttle::Throttle;
pub use validate::LoadedPlugins;

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{Config, ConnectorConfig, Problems};
use crate::messenger::MessengerFactory;
use crate::plugin::PluginRuntime;
use crate::telemetry::meters::Scope;
use crate::telemetry::tap::Taps;

use accounting::Accounting;
use connector::Source;

/// Runs a config.
pub struct Runner {
    config: Config,
    runtime: PluginRuntime,
    messengers: Arc<dyn MessengerFactory>,
    stats: Arc<RunStats>,
    interrupt: Interrupt,
    pause: Pause,
    throttle: Option<Arc<Throttle>>,
    /// Where connectors keep their state between runs.
    states: Arc<dyn crate::core::state::StateStores>,
    /// Connectors send everything again (`weir run --full`).
    full_sync: bool,
    /// Syncing connectors may delete any share of what they knew
    /// (`weir run --allow-deletes`).
    allow_deletes: bool,
    /// The sync this config's connectors keep state for (`[state] id`).
    sync_id: Option<String>,
    /// The stages reloads handed the workers.
    reloads: reload::Reloads,
    /// The taps open on this runner's documents (its process's: see
    /// `topology`), which its workers offer them to.
    taps: Taps,
    /// Where documents pushed to this run go (`grants.push`).
    pushes: crate::source::push::Pushes,
    /// The trace of the run going on, when the config keeps traces: a
    /// reload adds its generation's header to it.
    trace: std::sync::Mutex<Option<Arc<trace::Trace>>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").finish_non_exhaustive()
    }
}

/// What a tap on a run of `config` may name: its pipelines and their stages.
pub(crate) fn tap_names(config: &Config) -> crate::telemetry::tap::TapNames {
    crate::telemetry::tap::TapNames::new(config.pipelines.iter().map(|p| {
        let stages = p.stages.iter().map(|s| s.name.clone()).collect();
        (p.name.clone(), stages)
    }))
}

/// A fresh run id: time-ordered, unique enough for topics and logs.
pub fn new_run_id() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{millis:x}-{:08x}", fastrand::u32(..))
}

/// Whether `id` may be a run's id: it names Kafka topics and files, so 1
/// to 64 ASCII letters, digits, `-` and `_`.
pub fn is_run_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Runner {
    pub fn new(
        config: Config,
        runtime: PluginRuntime,
        messengers: Arc<dyn MessengerFactory>,
    ) -> Self {
        let taps = Taps::default();
        taps.know(tap_names(&config));
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
            states: Arc::new(Arc::<crate::core::state::MemoryStates>::default()),
            full_sync: false,
            allow_deletes: false,
            sync_id: config.state.id.clone(),
            reloads: reload::Reloads::default(),
            taps,
            pushes: crate::source::push::Pushes::default(),
            trace: std::sync::Mutex::default(),
            config,
        }
    }

    /// Offer documents to `taps` (by default, taps of this runner's own).
    pub fn with_taps(mut self, taps: Taps) -> Self {
        taps.know(tap_names(&self.config));
        self.taps = taps;
        self
    }

    /// The taps open on this runner's documents: a tap opened here takes
    /// them as they leave a stage.
    pub fn taps(&self) -> &Taps {
        &self.taps
    }

    /// Where documents pushed to this run go: its connectors' push
    /// sources (`grants.push`) while they run.
    pub fn pushes(&self) -> &crate::source::push::Pushes {
        &self.pushes
    }

    /// Keep connectors' state in `states` (by default in memory only).
    pub fn with_states(mut self, states: Arc<dyn crate::core::state::StateStores>) -> Self {
        self.states = states;
        self
    }

    /// Keep state for sync `id` (local mode: `[state] id`, else the config
    /// file's stem).
    pub fn with_sync_id(mut self, id: Option<String>) -> Self {
        self.sync_id = id;
        self
    }

    /// Let syncing connectors delete any share of what their state knew
    /// (`weir run --allow-deletes`): the mass-delete guard holds nothing.
    pub fn with_allow_deletes(mut self, allow: bool) -> Self {
        self.allow_deletes = allow;
        self
    }

    /// Ask connectors to send everything again (`weir run --full`); their
    /// state still tells them what is gone.
    pub fn with_full_sync(mut self, full: bool) -> Self {
        self.full_sync = full;
        self
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
        self.config
            .common_tenant(sources.iter().map(|(c, _)| c.pipeline.as_str()))
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

    /// Validate, then run every connector in order.
    pub fn run(&self) -> Result<RunResult, Problems> {
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
        let trace = self.start_trace(plugins, run_id, dead_letters.as_deref());
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
                    deleted: 0,
                    duplicates: 0,
                    elapsed: Duration::ZERO,
                    error: None,
                    // Stopped before it started: the run was interrupted.
                    interrupted: self.interrupt.is_set(),
                    skipped: true,
                    sync: None,
                });
                continue;
            }
            let result = self.run_connector(
                connector,
                source,
                plugins,
                run_id,
                dead_letters.as_ref(),
                trace.as_ref(),
            );
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
        self.taps.run_ended(run_id);
        if let Some(trace) = trace {
            trace.flush();
            *self.trace.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        let mut failed_in: Vec<&str> = (results.iter())
            .filter(|c| c.failed > 0)
            .map(|c| c.pipeline.as_str())
            .collect();
        failed_in.sort_unstable();
        failed_in.dedup();
        let kept = match &dead_letters {
            Some(file) if !failed_in.is_empty() => {
                vec![DeadLettersAt::File(file.path().to_path_buf())]
            }
            Some(_) => Vec::new(),
            None => (failed_in.iter())
                .filter_map(|&pipeline| {
                    let topic = self.messengers.dead_letters_in(pipeline)?;
                    Some(DeadLettersAt::Topic {
                        pipeline: pipeline.to_owned(),
                        topic,
                    })
                })
                .collect(),
        };
        let result = RunResult {
            run_id: run_id.to_owned(),
            connectors: results,
            stages: self.stats.stage_summaries(),
            cpu: self.stats.cpu(),
            elapsed: start.elapsed(),
            dead_letters: kept,
        };
        tracing::info!(status = ?result.status(), elapsed = ?result.elapsed, "run ended");
        meter.finish(result.status().name());
        for kept in &result.dead_letters {
            tracing::info!(%kept, "the failed documents are kept there: `weir replay` sends them again");
        }
        result
    }

    /// The trace of run `run_id`, when the config keeps traces (one that
    /// cannot be made is said in the log: the run goes on without it).
    fn start_trace(
        &self,
        plugins: &LoadedPlugins,
        run_id: &str,
        dead_letters: Option<&DeadLetterFile>,
    ) -> Option<Arc<trace::Trace>> {
        if !self.config.trace.enabled {
            return None;
        }
        let generation = self.reloads.generation();
        let current = self.reloads.current();
        let (config, plugins) = match &current {
            Some(set) => (&*set.config, &*set.plugins),
            None => (&self.config, plugins),
        };
        let header = trace::Header::of(
            run_id,
            generation,
            config,
            plugins,
            dead_letters.map(DeadLetterFile::path),
        );
        match trace::Trace::start(
            &self.config.trace.path,
            &header,
            self.config.trace.max_bytes(),
        ) {
            Ok(trace) => {
                let trace = Arc::new(trace);
                *self.trace.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(Arc::clone(&trace));
                Some(trace)
            }
            Err(e) => {
                tracing::warn!(dir = %self.config.trace.path.display(), error = %e, "cannot keep the run's trace: the run goes on without it");
                None
            }
        }
    }

    fn run_connector(
        &self,
        c: &ConnectorConfig,
        source: Source,
        plugins: &LoadedPlugins,
        run_id: &str,
        dead_letters: Option<&Arc<DeadLetterFile>>,
        trace: Option<&Arc<trace::Trace>>,
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
        if let Some(trace) = trace {
            let _ = accounting.trace.set((Arc::clone(trace), c.name.clone()));
        }
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
            deleted: Accounting::get(&accounting.deleted),
            duplicates: settled.duplicates,
            elapsed: start.elapsed(),
            interrupted: error.as_ref().is_some_and(StopReason::is_interrupted),
            error: error.map(|e| e.to_string()),
            skipped: false,
            sync: accounting.sync_note(),
        };
        tracing::info!(
            published = result.published,
            children = result.created,
            succeeded = result.succeeded,
            failed = result.failed,
            dropped = result.dropped,
            deleted = result.deleted,
            elapsed = ?result.elapsed,
            "connector finished"
        );
        result
    }
}
