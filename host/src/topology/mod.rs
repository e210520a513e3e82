//! One place that turns a config and a mode into what runs: the plugin
//! runtime, a [`Runner`] with the messengers of its mode, the serving roles
//! of Kafka mode ([`serving`]) and the operations server. The command line
//! and the control plane both call it; neither builds messengers itself.
//!
//! | mode | connectors | workers and indexers | messengers |
//! | --- | --- | --- | --- |
//! | [`Mode::Local`] | this process | this process | in-memory queues |
//! | [`Mode::Kafka`] | this process | `weir worker` / `weir indexer` / `weir hybrid` | Kafka topics |
//!
//! Connectors keep their state in a SQLite file in local mode
//! (`[state] path`) and on a compacted topic per pipeline in Kafka mode.
//!
//! The taps on a process's documents are the topology's too: a runner it
//! makes gets [`Taps`] of its own, which its workers offer documents to
//! and its operations server ([`ops_server_for`]) opens taps on; no tap
//! state is global.

pub mod serving;

use std::sync::Arc;

use crate::config::{Config, PluginRole, Problem, Problems};
use crate::messenger::LocalMessengers;
use crate::messenger::kafka::{KafkaMessengers, KafkaStates};
use crate::plugin::{
    InstancePolicy, PluginRuntime, PoolOptions, RuntimeOptions, default_cache_dir,
};
use crate::run::{Runner, SqliteStates};
pub use crate::telemetry::export::Health;
use crate::telemetry::tap::Taps;

/// Where a run's workers and indexers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything in this process, no services.
    Local,
    /// Connectors here; workers and indexers are serving processes reached
    /// through the Kafka cluster in `[kafka]`.
    Kafka,
}

/// Why what a config asks for could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The config asks for something it cannot have: report every problem.
    #[error("{0}")]
    Invalid(Problems),
    /// The process could not set up what a valid config asks for.
    #[error("{0}")]
    Failed(String),
}

impl SetupError {
    fn failed(why: impl std::fmt::Display) -> Self {
        Self::Failed(why.to_string())
    }
}

/// A runner for `config` in `mode`, with the plugin runtime it needs.
pub fn runner(config: Config, mode: Mode) -> Result<Runner, SetupError> {
    let runtime = runtime_for(&config)?;
    let (messengers, states): (
        Arc<dyn crate::messenger::MessengerFactory>,
        Arc<dyn crate::core::state::StateStores>,
    ) = match mode {
        Mode::Local => (
            Arc::new(LocalMessengers {
                capacity: config.publisher.queue_capacity,
                max_bytes: config.publisher.queue_max_bytes(),
            }),
            Arc::new(SqliteStates::new(&config.state.path)),
        ),
        Mode::Kafka => {
            let kafka = kafka_of(&config)?.clone();
            (
                Arc::new(KafkaMessengers::new(kafka.clone())),
                Arc::new(KafkaStates::new(kafka)),
            )
        }
    };
    let sync_id = match mode {
        Mode::Local => config.state.local_id().map(str::to_owned),
        Mode::Kafka => config.state.id.clone(),
    };
    Ok(Runner::new(config, runtime, messengers)
        .with_states(states)
        .with_sync_id(sync_id)
        .with_taps(Taps::default()))
}

/// A Kafka-mode runner that resumes a run an earlier runner started
/// (`weir run --resume`, a standby `weir serve` taking a run over): each
/// connector reads what the run's journal says it did first.
pub fn resuming_runner(config: Config) -> Result<Runner, SetupError> {
    let runtime = runtime_for(&config)?;
    let kafka = kafka_of(&config)?.clone();
    let messengers = Arc::new(KafkaMessengers::resuming(kafka.clone()));
    Ok(Runner::new(config, runtime, messengers)
        .with_states(Arc::new(KafkaStates::new(kafka)))
        .with_taps(Taps::default()))
}

/// The `[kafka]` settings Kafka mode needs.
pub(crate) fn kafka_of(config: &Config) -> Result<&crate::config::KafkaConfig, SetupError> {
    config.kafka.as_ref().ok_or_else(|| {
        SetupError::Invalid(Problems::one(Problem::new(
            "kafka",
            "Kafka mode needs a [kafka] section (bootstrap_servers, ...)",
        )))
    })
}

/// The plugin runtime a run of `config` needs: its component cache, and
/// a pool of pre-reserved instance slots when a plugin wants fresh instances.
pub fn runtime_for(config: &Config) -> Result<PluginRuntime, SetupError> {
    // Fresh instances per document come from a pool of pre-reserved slots:
    // enough for every instance the process may hold, twice over: its
    // connectors, its stages and their shadows (one per worker thread, as
    // the walk counts them), and an indexer per pipeline and worker thread.
    let fresh = config
        .plugins()
        .any(|at| at.spec.instance == InstancePolicy::Fresh);
    let pool = fresh.then(|| {
        let held: usize = config
            .plugins()
            .filter(|at| {
                matches!(
                    at.role,
                    PluginRole::Connector { .. }
                        | PluginRole::Stage { .. }
                        | PluginRole::Shadow { .. }
                )
            })
            .map(|at| at.instances)
            .fold(0, usize::saturating_add);
        let indexers = config.worker.threads * config.pipelines.len();
        let instances = 2 * (held + indexers + 4);
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
        host_cache: host_cache_of(config),
        ..RuntimeOptions::default()
    })
    .map_err(|e| SetupError::Failed(format!("cannot start the plugin runtime: {e:#}")))
}

/// Where the plugins of `config` keep what they cache (`[cache]`).
fn host_cache_of(config: &Config) -> Option<crate::plugin::HostCacheOptions> {
    let cache = &config.cache;
    cache.enabled.then(|| crate::plugin::HostCacheOptions {
        path: cache.path.clone(),
        max_entries: cache.max_entries,
        max_bytes: cache.max_bytes(),
    })
}

/// The operations routes of a process: `/metrics`, `/healthz` and
/// `/readyz` answering as `health` says, and `/tap` on `runner`'s taps
/// where its config allows them (`[metrics] tap`; refused without a
/// runner).
pub fn ops_routes(health: &Health, runner: Option<&Runner>) -> Result<axum::Router, SetupError> {
    let handle = crate::telemetry::export::recorder().map_err(SetupError::failed)?;
    let taps = runner.map(|r| r.taps().clone());
    let allowed = runner.is_some_and(|r| r.config().metrics.tap);
    Ok(crate::telemetry::export::routes(handle, health.clone())
        .merge(crate::telemetry::tap::routes(taps, allowed)))
}

/// The operations server of a process that runs no pipeline (its `/tap`
/// refuses) on `addr`; `None` when no address is given.
pub fn ops_server(
    addr: Option<&str>,
    health: &Health,
) -> Result<Option<crate::http::HttpServer>, SetupError> {
    start_ops(addr, || ops_routes(health, None))
}

/// The operations server of a process that runs `runner` on `addr`
/// ([`ops_routes`]: `/tap` on its documents where its config allows);
/// `None` when no address is given.
pub fn ops_server_for(
    runner: &Runner,
    addr: Option<&str>,
    health: &Health,
) -> Result<Option<crate::http::HttpServer>, SetupError> {
    start_ops(addr, || ops_routes(health, Some(runner)))
}

/// The operations server on `addr`, its routes made only when there is one.
fn start_ops(
    addr: Option<&str>,
    routes: impl FnOnce() -> Result<axum::Router, SetupError>,
) -> Result<Option<crate::http::HttpServer>, SetupError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let server = crate::http::HttpServer::start(addr, routes()?)
        .map_err(|e| SetupError::Failed(format!("{e:#}")))?;
    tracing::info!(addr = %server.addr(), "metrics on http://{}/metrics", server.addr());
    Ok(Some(server))
}
