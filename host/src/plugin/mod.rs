//! The plugin runtime: the only part of Weir that knows wasmtime.
//!
//! - [`PluginRuntime`] owns the engine, the linker and the compiled-component
//!   cache, and ticks the epoch that enforces call deadlines. Make one per
//!   process; it is cheap to clone.
//! - [`PluginRuntime::load_stage`] (and `load_connector`, `load_indexer`)
//!   compiles a component once, or loads it precompiled from the on-disk
//!   cache, and checks it against its world. The result is shared by workers.
//! - Each worker calls `instantiate` to get its own instance: its own store,
//!   memory cap, deadline and WASI grants. An instance that traps is dropped
//!   and replaced on the next call, so one bad document never poisons the next.

mod batch_world;
mod bindings;
mod budget;
mod cache;
mod contract;
mod error;
mod grant;
mod host;
mod indexer_batch;
mod instance;
mod kinds;
mod packed;
mod queue_grant;
mod resources;
mod sources;
mod spec;
mod stage;
mod store;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine};

pub use crate::core::limit::{Limit, LimitHit};
pub use bindings::ConfigIssue;
pub use cache::{CacheError, file_sha256};
pub use contract::ContractError;
pub use contract::{SUPPORTED as SUPPORTED_CONTRACTS, supported_list as supported_contracts};
pub use error::{KindError, PluginError, RuntimeError, TrapCause};
pub use grant::{OpenedDir, relative_below};
pub use host::{ConnectorState, HostCache, HostCacheOptions, MAX_RECEIVE, MessageSession};
pub(crate) use host::{HttpAllow, SqlTarget};
pub use indexer_batch::{BatchFailure, BatchFormat, DocumentFailure};
pub use kinds::{ConnectorInstance, ConnectorPlugin, IndexerInstance, IndexerPlugin};
pub use queue_grant::{QueueGrant, QueueServer, QueueTopic};
pub use resources::PublishSink;
pub use sources::{KafkaGrant, KafkaStart, PushGrant, SourceGrant};
pub use spec::{DirGrant, Grants, InstancePolicy, Limits, PluginSpec};
pub use stage::{DocumentOutcome, StageInstance, StagePlugin};

/// Who a plugin is in logs and metrics: the name the config gives it, and
/// the tenant whose run it serves. Labels only: what a plugin may do is in
/// its [`PluginSpec`]. A plain name converts into a label with no tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLabel<'a> {
    pub name: &'a str,
    pub tenant: Option<&'a str>,
}

impl<'a> From<&'a str> for PluginLabel<'a> {
    fn from(name: &'a str) -> Self {
        Self { name, tenant: None }
    }
}

impl<'a> From<&'a String> for PluginLabel<'a> {
    fn from(name: &'a String) -> Self {
        name.as_str().into()
    }
}

use cache::ComponentCache;
use host::PluginState;

/// Options for a [`PluginRuntime`].
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Where precompiled components are kept; `None` compiles in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Most the cache directory's entries may hold, in bytes; the least
    /// recently used are removed past it (default 2 GiB: ~60 Python or
    /// JavaScript plugins, thousands of Rust ones).
    pub cache_max_bytes: u64,
    /// How often the epoch advances. Deadlines are enforced to about one tick.
    pub epoch_tick: Duration,
    /// Whether call deadlines are enforced at all (epoch interruption). Off
    /// only to measure what the deadline costs: a looping plugin then hangs.
    pub deadlines: bool,
    /// Instantiate from wasmtime's pooling allocator (pre-reserved slots,
    /// cheap to reuse) instead of allocating each instance afresh; for fresh
    /// instances per document. `None`: no pool.
    pub pool: Option<PoolOptions>,
    /// The cache plugins keep bytes in (the `cache` interface), shared by
    /// every instance of the runtime. `None`: calls find nothing and keep
    /// nothing.
    pub host_cache: Option<HostCacheOptions>,
}

/// The pooling allocator's slots.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// Component instances alive at once, at most.
    pub instances: u32,
    /// Largest linear memory of any plugin, in MiB.
    pub max_memory_mib: u64,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            cache_max_bytes: DEFAULT_CACHE_MAX_MIB << 20,
            epoch_tick: Duration::from_millis(5),
            deadlines: true,
            pool: None,
            host_cache: None,
        }
    }
}

/// The default size of the cache of compiled plugins (`runner.cache_max_mib`).
pub const DEFAULT_CACHE_MAX_MIB: u64 = 2048;

/// `$WEIR_CACHE_DIR`, else `$XDG_CACHE_HOME/weir`, else `~/.cache/weir`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("WEIR_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(Path::new(&dir).join("weir"));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache").join("weir"))
}

/// Loads, sandboxes and instantiates plugins. Clone freely.
#[derive(Clone)]
pub struct PluginRuntime {
    inner: Arc<RuntimeInner>,
}

impl std::fmt::Debug for PluginRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRuntime")
            .field("cache", &self.inner.cache)
            .field("epoch_tick", &self.inner.epoch_tick)
            .finish_non_exhaustive()
    }
}

pub(crate) struct RuntimeInner {
    engine: Engine,
    linker: Linker<PluginState>,
    cache: ComponentCache,
    epoch_tick: Duration,
    stop_ticker: Arc<AtomicBool>,
    /// Drives what plugin calls wait on (timers, sockets, HTTP, file work
    /// on its blocking pool). The calls themselves run on the caller's thread.
    io: IoRuntime,
    /// The cache of the `cache` interface, if the run keeps one.
    host_cache: Option<Arc<HostCache>>,
}

/// Most threads plugins' file I/O runs on at once, in one process. A file
/// operation that never returns (a read of a FIFO with no writer) holds
/// its thread until it does, though the call that started it ended at its
/// deadline: at most this many are ever held, and past them further file
/// I/O waits for a free thread (within its call's deadline).
pub(crate) const MAX_FILE_IO_THREADS: usize = 512;

/// The runtime behind plugin calls' waits. Dropped without waiting for its
/// blocking pool: a thread stuck in a file operation that never returns
/// must not hold up the end of a run.
struct IoRuntime(Option<tokio::runtime::Runtime>);

impl IoRuntime {
    fn new() -> std::io::Result<Self> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(MAX_FILE_IO_THREADS)
            .thread_name("weir-plugin-io")
            .enable_all()
            .build()
            .map(|runtime| Self(Some(runtime)))
    }

    fn get(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for IoRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl RuntimeInner {
    /// Run `call` on this thread until it completes or `deadline` passes
    /// (`None`; the call is then dropped, which cancels what it waits on).
    ///
    /// Most calls never wait: they finish in their first poll, which runs
    /// here with the runtime's context entered and no timer set; only a call
    /// that waits (a sleep, a socket) goes on under the runtime with one.
    pub(crate) fn block_on_until<F: Future>(
        &self,
        deadline: Instant,
        cancel: &Cancel,
        call: F,
    ) -> Option<F::Output> {
        // Entered for the whole call: a call cut off at its deadline is
        // dropped here too, and dropping it runs host code (the guest's
        // stack unwinds) that may need the runtime.
        let io = self.io.get();
        let _context = io.enter();
        let mut call = std::pin::pin!(call);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(out) = call.as_mut().poll(&mut cx) {
            return Some(out);
        }
        // Waiting: polled again with a real waker, which replaces the no-op one.
        io.handle().block_on(async {
            tokio::select! {
                // The call first: one that completes as time runs out counts.
                biased;
                out = call => Some(out),
                () = tokio::time::sleep_until(deadline.into()) => None,
                () = cancel.cancelled() => None,
            }
        })
    }
}

/// Stops a plugin call in progress from another thread: the call ends
/// with [`TrapCause::Cancelled`] whether the guest computes or waits in the
/// host, and the instance is discarded. Cloned handles cancel the same call.
#[derive(Debug, Clone)]
pub struct Cancel(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Cancel {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Cancel {
    /// Whether both cancel the same instance's calls.
    pub fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub fn cancel(&self) {
        self.0.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Let later calls run: the call this was for is over.
    pub(crate) fn reset(&self) {
        self.0.send_replace(false);
    }

    async fn cancelled(&self) {
        let mut changes = self.0.subscribe();
        let _ = changes.wait_for(|cancelled| *cancelled).await;
    }
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl PluginRuntime {
    /// A runtime with the given options.
    pub fn new(options: RuntimeOptions) -> Result<Self, RuntimeError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(options.deadlines);
        if std::env::var_os("WEIR_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        if let Some(pool) = options.pool {
            let mut pooling = wasmtime::PoolingAllocationConfig::default();
            // A component is a few core instances (the guest, the WASI
            // adapter, shims), each with a memory or two and tables.
            let instances = pool.instances.max(1);
            pooling
                .total_component_instances(instances)
                .total_core_instances(instances.saturating_mul(8))
                .total_memories(instances.saturating_mul(2))
                .total_tables(instances.saturating_mul(4))
                .max_memory_size(
                    usize::try_from(pool.max_memory_mib.saturating_mul(1 << 20))
                        .unwrap_or(usize::MAX),
                )
                // Reset reused memory by unmapping it, not by zeroing pages in
                // place: measured, zeroing even 64 KiB resident costs more.
                .linear_memory_keep_resident(0);
            config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pooling));
        }
        let engine = Engine::new(&config)?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        host::add_http_to_linker(&mut linker)?;
        type Own = HasSelf<PluginState>;
        bindings::stage::weir::plugin::log::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        bindings::stage::weir::plugin::document::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        bindings::connector::weir::plugin::publishing::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        bindings::packing_connector::weir::plugin::publishing_packed::add_to_linker::<_, Own>(
            &mut linker,
            |s| s,
        )?;
        bindings::counting_connector::weir::plugin::progress::add_to_linker::<_, Own>(
            &mut linker,
            |s| s,
        )?;
        bindings::batch_stage::weir::plugin::fields::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        bindings::lent_stage::weir::plugin::lending::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        bindings::packing_stage::weir::plugin::lending_packed::add_to_linker::<_, Own>(
            &mut linker,
            |s| s,
        )?;
        bindings::syncing_connector::weir::plugin::sync::add_to_linker::<_, Own>(
            &mut linker,
            |s| s,
        )?;
        bindings::syncing_connector::weir::plugin::sql::add_to_linker::<_, Own>(
            &mut linker,
            |s| s,
        )?;
        bindings::caching_stage::weir::plugin::cache::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        bindings::streaming_connector::weir::plugin::messages::add_to_linker::<_, Own>(
            &mut linker,
            |s| s,
        )?;

        let stop_ticker = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(engine.weak(), options.epoch_tick, Arc::clone(&stop_ticker))?;

        Ok(Self {
            inner: Arc::new(RuntimeInner {
                cache: ComponentCache::new(options.cache_dir, options.cache_max_bytes),
                engine,
                linker,
                epoch_tick: options.epoch_tick,
                stop_ticker,
                io: IoRuntime::new()?,
                host_cache: options.host_cache.map(|o| Arc::new(HostCache::new(o))),
            }),
        })
    }

    /// Load a stage plugin named `name` (the name used in logs and errors).
    pub fn load_stage<'a>(
        &self,
        label: impl Into<PluginLabel<'a>>,
        spec: &PluginSpec,
    ) -> Result<StagePlugin, PluginError> {
        StagePlugin::load(self.loader(label.into(), spec)?)
    }

    /// Load a connector plugin.
    pub fn load_connector<'a>(
        &self,
        label: impl Into<PluginLabel<'a>>,
        spec: &PluginSpec,
    ) -> Result<ConnectorPlugin, PluginError> {
        ConnectorPlugin::load(self.loader(label.into(), spec)?)
    }

    /// Load an indexer plugin.
    pub fn load_indexer<'a>(
        &self,
        label: impl Into<PluginLabel<'a>>,
        spec: &PluginSpec,
    ) -> Result<IndexerPlugin, PluginError> {
        IndexerPlugin::load(self.loader(label.into(), spec)?)
    }

    /// Which kind of plugin the component in `path` is (`stage`,
    /// `connector` or `indexer`), from the contract interface it exports.
    pub fn plugin_kind(&self, path: &Path) -> Result<&'static str, KindError> {
        let (component, _) = self.inner.cache.load(&self.inner.engine, path, None)?;
        contract::kind_of(&component, &self.inner.engine).ok_or_else(|| KindError::NotAPlugin {
            path: path.to_owned(),
            supported: contract::supported_list(),
        })
    }

    fn loader(
        &self,
        label: PluginLabel<'_>,
        spec: &PluginSpec,
    ) -> Result<instance::Loaded, PluginError> {
        instance::Loaded::new(Arc::clone(&self.inner), label, spec)
    }
}

/// Advances the engine's epoch every `tick` until the runtime is dropped.
fn spawn_epoch_ticker(
    engine: wasmtime::EngineWeak,
    tick: Duration,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let stop: Weak<AtomicBool> = Arc::downgrade(&stop);
    thread::Builder::new()
        .name("weir-epoch".into())
        .spawn(move || {
            loop {
                thread::sleep(tick);
                let stopped = stop.upgrade().is_none_or(|s| s.load(Ordering::Relaxed));
                match engine.upgrade() {
                    Some(engine) if !stopped => engine.increment_epoch(),
                    _ => return,
                }
            }
        })?;
    Ok(())
}
