//! One sandboxed instance of a plugin, whatever its kind: its store (memory
//! cap, deadline, WASI grants), its replacement after a trap, and the
//! classification of a failed call.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, InstancePre, Resource, ResourceTableError};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::{PluginLabel, RuntimeInner};
use crate::telemetry::events::{LogLinesDropped, PluginTrapped};

/// How many epoch ticks a computing guest runs between checks of its
/// deadline and of cancellation.
const CHECK_TICKS: u64 = 10;

/// Ticks past its deadline before a computing guest is interrupted: a host
/// call that gave up at the deadline gets to return its error first.
const INTERRUPT_SLACK_TICKS: u32 = 4;
use super::bindings::GuestError;
use super::budget::{Budget, MAX_HANDLES, MAX_HTTP_FIELDS_BYTES};
use super::error::{PluginError, TrapCause};
use super::grant::OpenedDir;
use super::host::{GuestOutput, HttpAllow, HttpPolicy, LogLimiter, PluginState};
use super::spec::{InstancePolicy, PluginSpec};
use crate::core::document::Document;
use crate::core::limit::{Limit, LimitHit};

/// A compiled plugin with its name and spec, shared by all its instances.
#[derive(Clone)]
pub(crate) struct Loaded {
    runtime: Arc<RuntimeInner>,
    pub(crate) name: Arc<str>,
    /// The tenant whose run the plugin serves: a label of its metrics.
    pub(crate) tenant: Option<Arc<str>>,
    pub(crate) spec: PluginSpec,
    component: Component,
    http_allow: Arc<[HttpAllow]>,
    /// The plugin's config as JSON text, as handed to `check-config` and `start`.
    pub(crate) config_json: String,
}

impl Loaded {
    pub(crate) fn new(
        runtime: Arc<RuntimeInner>,
        label: PluginLabel<'_>,
        spec: &PluginSpec,
    ) -> Result<Self, PluginError> {
        let name = label.name;
        let http_allow = spec
            .grants
            .http
            .iter()
            .map(|entry| HttpAllow::parse(entry))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| PluginError::Instantiate {
                plugin: name.to_owned(),
                message: format!("grants.http: {message}"),
            })?;
        let mut spec = spec.clone();
        for dir in spec.grants.dirs.iter_mut().filter(|d| d.opened.is_none()) {
            dir.opened =
                Some(
                    OpenedDir::open(&dir.host).map_err(|e| PluginError::Instantiate {
                        plugin: name.to_owned(),
                        message: format!(
                            "granted directory {} cannot be opened: {e}",
                            dir.host.display()
                        ),
                    })?,
                );
        }
        let component = runtime
            .cache
            .load(&runtime.engine, &spec.path, spec.sha256.as_deref())
            .map_err(|e| PluginError::Load {
                plugin: name.to_owned(),
                path: spec.path.clone(),
                message: format!("{e:#}"),
            })?;
        Ok(Self {
            runtime,
            name: Arc::from(name),
            tenant: label.tenant.map(Arc::from),
            config_json: spec.config.to_string(),
            spec,
            component,
            http_allow: http_allow.into(),
        })
    }

    /// Link the component against the host, checking its imports.
    /// Linked against the host, once the component is checked to be built
    /// for a contract version this host runs, as a plugin of `kind`.
    pub(crate) fn instance_pre(
        &self,
        kind: &str,
        api: &str,
    ) -> Result<InstancePre<PluginState>, PluginError> {
        super::contract::check(&self.component, &self.runtime.engine, kind, api)
            .map_err(|e| self.instantiate_error(e))?;
        self.runtime
            .linker
            .instantiate_pre(&self.component)
            .map_err(|e| self.instantiate_error(e))
    }

    pub(crate) fn instantiate_error(&self, e: impl std::fmt::Display) -> PluginError {
        PluginError::Instantiate {
            plugin: self.name.to_string(),
            message: e.to_string(),
        }
    }

    /// A fresh store with this plugin's grants and limits, its calls
    /// stopped by `cancel`.
    fn new_store(&self, cancel: &super::Cancel) -> Result<Store<PluginState>, PluginError> {
        let grants = &self.spec.grants;
        let limits = &self.spec.limits;
        let logs = Arc::new(Mutex::new(LogLimiter::new(limits.log_lines_per_second())));
        let stderr = GuestOutput::new(Arc::clone(&self.name), "stderr", Arc::clone(&logs));
        let mut wasi = WasiCtxBuilder::new();
        // File I/O runs on the runtime's blocking pool, never on the
        // worker's thread: a read that never returns (a FIFO with no
        // writer, a hung mount) then ends at the call's deadline like any
        // other wait, instead of holding the worker past it. It costs a
        // thread hop per operation (measured in docs/sandbox.md).
        wasi.allow_blocking_current_thread(false);
        wasi.stdout(GuestOutput::new(
            Arc::clone(&self.name),
            "stdout",
            Arc::clone(&logs),
        ))
        .stderr(stderr.clone());
        for (key, value) in &grants.env {
            wasi.env(key, value);
        }
        for dir in &grants.dirs {
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            // The handle opened when the plugin was loaded (or admitted):
            // whatever its path leads to now is not what was granted.
            let host = dir
                .opened
                .as_ref()
                .map_or_else(|| dir.host.clone(), OpenedDir::handle_path);
            wasi.preopened_dir(&host, &dir.guest, perms).map_err(|e| {
                self.instantiate_error(format!(
                    "granted directory {} cannot be opened: {e:#}",
                    dir.host.display()
                ))
            })?;
        }
        let budget = Budget::new(limits);
        let mut table = wasmtime::component::ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES);
        let mut docs = wasmtime::component::ResourceTable::new();
        docs.set_max_capacity(budget.documents_capacity());
        let mut http = wasmtime_wasi_http::WasiHttpCtx::new();
        http.set_field_size_limit(MAX_HTTP_FIELDS_BYTES);
        let state = PluginState {
            plugin: Arc::clone(&self.name),
            table,
            docs,
            wasi: wasi.build(),
            http,
            http_policy: HttpPolicy::new(
                Arc::clone(&self.name),
                self.tenant.clone(),
                Arc::clone(&self.http_allow),
                Arc::clone(&logs),
            ),
            budget,
            lent: Vec::new(),
            stderr,
            logs,
            cancel: cancel.clone(),
            interrupt_at: None,
        };
        let handles = state.budget.component_handles();
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|s| &mut s.budget);
        // Room in the engine for every document `limits.max_children` lets
        // the guest hold: the budget refuses the next one, naming the limit.
        store.set_max_component_handles(handles);
        // A computing guest is interrupted at its deadline, or sooner when
        // the call is cancelled: checked every few ticks, and in the tick
        // the deadline falls in.
        let tick = self.runtime.epoch_tick.as_nanos().max(1);
        store.epoch_deadline_callback(move |store| {
            let state = store.data();
            let left = state.interrupt_at.map_or(Duration::ZERO, |at| {
                at.saturating_duration_since(Instant::now())
            });
            Ok(if left.is_zero() || state.cancel.is_cancelled() {
                UpdateDeadline::Interrupt
            } else {
                let ticks = u64::try_from(left.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX);
                UpdateDeadline::Continue(ticks.clamp(1, CHECK_TICKS))
            })
        });
        Ok(store)
    }

    fn deadline_ticks(&self, timeout: Duration) -> u64 {
        let tick = self.runtime.epoch_tick.as_nanos().max(1);
        // One extra tick: the current epoch may be about to advance.
        u64::try_from(timeout.as_nanos().div_ceil(tick) + 1)
            .unwrap_or(u64::MAX)
            .min(CHECK_TICKS)
    }

    /// Why a call failed, from the error and what the store saw.
    fn classify(
        &self,
        error: wasmtime::Error,
        store: &Store<PluginState>,
        timeout: Duration,
    ) -> TrapCause {
        if let Some(hit) = &store.data().budget.hit {
            return TrapCause::Limit(hit.clone());
        }
        if let Some(wanted_bytes) = store.data().budget.refused_growth {
            return TrapCause::MemoryLimit {
                limit_mib: self.spec.limits.memory_mib(),
                wanted_bytes,
            };
        }
        if let Some(ResourceTableError::Full) = error.downcast_ref::<ResourceTableError>() {
            return TrapCause::Limit(LimitHit::new(
                Limit::Handles,
                format!(
                    "had more than {MAX_HANDLES} handles open at once (files, streams, HTTP requests, fields and bodies)"
                ),
            ));
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) if store.data().cancel.is_cancelled() => TrapCause::Cancelled,
            Some(Trap::Interrupt) => TrapCause::Deadline(timeout),
            Some(Trap::UnreachableCodeReached) => {
                TrapCause::Panic(panic_message(&store.data().stderr.recent()))
            }
            Some(Trap::StackOverflow) => TrapCause::Other("stack overflow".into()),
            _ => TrapCause::Other(format!("{error:#}")),
        }
    }

    /// Run `call` to completion on this thread, for at most `timeout` of
    /// wall-clock time: time the guest spends blocked in the host (sleeping,
    /// polling, waiting for an HTTP peer) counts as much as time computing
    /// (which the epoch deadline interrupts). A panic in host code during
    /// the call is caught and reported; the caller discards the instance.
    fn run<R>(
        &self,
        store: &mut Store<PluginState>,
        cancel: &super::Cancel,
        timeout: Duration,
        call: impl AsyncFnOnce(&mut Store<PluginState>) -> wasmtime::Result<R>,
    ) -> Result<R, TrapCause> {
        let deadline = crate::core::time::deadline_after(timeout);
        store.set_epoch_deadline(self.deadline_ticks(timeout));
        store.data_mut().http_policy.deadline = Some(deadline);
        store.data_mut().interrupt_at = Some(crate::core::time::saturating_add(
            deadline,
            INTERRUPT_SLACK_TICKS * self.runtime.epoch_tick,
        ));
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            self.runtime
                .block_on_until(deadline, cancel, call(&mut *store))
        }));
        store.data_mut().http_policy.deadline = None;
        store.data_mut().interrupt_at = None;
        match outcome {
            Ok(Some(Ok(r))) => Ok(r),
            Ok(Some(Err(error))) => Err(self.classify(error, store, timeout)),
            Ok(None) if cancel.is_cancelled() => Err(TrapCause::Cancelled),
            Ok(None) => Err(TrapCause::Deadline(timeout)),
            Err(panic) => Err(TrapCause::HostPanic(crate::core::text::panic_text(&*panic))),
        }
    }
}

/// The guest's panic message from its last stderr lines, if it printed one.
fn panic_message(lines: &[String]) -> String {
    let start = lines.iter().rposition(|l| l.contains("panicked at"));
    let message: Vec<&str> = match start {
        Some(i) => lines[i..]
            .iter()
            .map(String::as_str)
            .filter(|l| !l.starts_with("note:"))
            .collect(),
        None => Vec::new(),
    };
    if message.is_empty() {
        "the guest aborted (unreachable instruction) without a panic message".into()
    } else {
        message.join(" ")
    }
}

/// The bindings of one world, instantiated into a store.
pub(crate) trait World: Sized + Send {
    /// The plugin kind, for messages, and the contract interface it exports.
    const KIND: &'static str;
    const API: &'static str;
    /// Pre-linked form, shared across instantiations.
    type Pre: Clone + Send + Sync;
    fn pre(pre: InstancePre<PluginState>) -> wasmtime::Result<Self::Pre>;
    async fn instantiate(pre: &Self::Pre, store: &mut Store<PluginState>)
    -> wasmtime::Result<Self>;
    /// What the kind's `start` answers (the indexer's batch format).
    type Started: Default + Clone + Send;
    /// The kind's `start` export with the plugin's config, where it has one.
    async fn start(
        &self,
        store: &mut Store<PluginState>,
        config: &str,
    ) -> wasmtime::Result<Result<Self::Started, GuestError>>;
}

/// A plugin of world `W`, ready to instantiate.
pub(crate) struct Prepared<W: World> {
    pub(crate) loaded: Arc<Loaded>,
    pre: W::Pre,
}

impl<W: World> Clone for Prepared<W> {
    fn clone(&self) -> Self {
        Self {
            loaded: Arc::clone(&self.loaded),
            pre: self.pre.clone(),
        }
    }
}

impl<W: World> Prepared<W> {
    /// The same plugin, its instances given `vars` in their environment
    /// besides what its grants give.
    pub(crate) fn with_env(&self, vars: &[(&str, String)]) -> Self {
        let mut loaded = (*self.loaded).clone();
        for (name, value) in vars {
            loaded
                .spec
                .grants
                .env
                .insert((*name).to_owned(), value.clone());
        }
        Self {
            loaded: Arc::new(loaded),
            pre: self.pre.clone(),
        }
    }

    pub(crate) fn new(loaded: Loaded) -> Result<Self, PluginError> {
        let pre = W::pre(loaded.instance_pre(W::KIND, W::API)?).map_err(|e| {
            loaded.instantiate_error(format!(
                "the component does not export what its plugin kind requires: {e:#}"
            ))
        })?;
        Ok(Self {
            loaded: Arc::new(loaded),
            pre,
        })
    }

    /// A new instance in a new store, its start-up code run within the call
    /// deadline; then, when `start`, the kind's `start` call (its errors are
    /// fatal, whatever the guest called them).
    fn instantiate(&self, start: bool, cancel: &super::Cancel) -> Result<Live<W>, PluginError> {
        let loaded = &*self.loaded;
        let mut store = loaded.new_store(cancel)?;
        // Kept beside the store: a call borrows the store whole.
        let cancel = cancel.clone();
        let timeout = loaded.spec.limits.call_timeout();
        let bindings = loaded
            .run(&mut store, &cancel, timeout, async |store| {
                W::instantiate(&self.pre, store).await
            })
            .map_err(|cause| {
                loaded.instantiate_error(format!("its start-up code failed: {cause}"))
            })?;
        if start {
            let config = &loaded.config_json;
            let started = loaded
                .run(&mut store, &cancel, timeout, async |store| {
                    bindings.start(store, config).await
                })
                .map_err(|cause| loaded.instantiate_error(format!("start trapped: {cause}")))?;
            return match started {
                Ok(started) => Ok(Live {
                    store,
                    cancel,
                    bindings,
                    started,
                }),
                Err(
                    GuestError::Document(message)
                    | GuestError::Transient(message)
                    | GuestError::Fatal(message),
                ) => Err(PluginError::Fatal {
                    plugin: loaded.name.to_string(),
                    message: format!("start failed: {message}"),
                }),
            };
        }
        Ok(Live {
            store,
            cancel,
            bindings,
            started: W::Started::default(),
        })
    }
}

/// A live instance: a store and the bindings instantiated in it.
pub(crate) struct Live<W: World> {
    pub(crate) store: Store<PluginState>,
    /// The store's [`super::Cancel`].
    cancel: super::Cancel,
    pub(crate) bindings: W,
    /// What the kind's `start` answered.
    pub(crate) started: W::Started,
}

/// A replaceable instance: it is dropped when a call traps and made afresh
/// (including the kind's start-up call) on the next use.
pub(crate) struct Instance<W: World> {
    prepared: Prepared<W>,
    live: Option<Live<W>>,
    /// Whether a new instance gets the kind's `start` call.
    start: bool,
    /// Stops the call in progress, whichever instance makes it: the same
    /// handle serves every replacement.
    cancel: super::Cancel,
    /// How many times this instance was replaced after a trap.
    pub(crate) restarts: u64,
    /// Log lines written during the last call (`.0`), and dropped as over
    /// the plugin's log rate (`.1`).
    pub(crate) log_lines: (u64, u64),
}

impl<W: World> Instance<W> {
    /// Instantiate and, when `start`, run the kind's `start` once; its
    /// error is returned as is.
    pub(crate) fn start(prepared: Prepared<W>, start: bool) -> Result<Self, PluginError> {
        let mut instance = Self {
            prepared,
            live: None,
            start,
            cancel: super::Cancel::default(),
            restarts: 0,
            log_lines: (0, 0),
        };
        instance.live()?;
        Ok(instance)
    }

    pub(crate) fn loaded(&self) -> &Loaded {
        &self.prepared.loaded
    }

    /// A handle that stops the call in progress, now or after the instance
    /// is replaced.
    pub(crate) fn canceller(&self) -> super::Cancel {
        self.cancel.clone()
    }

    /// Whether an instance is live (none after a trap, until the next call).
    pub(crate) fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// What the live instance's `start` answered (instantiating it if needed).
    pub(crate) fn started(&mut self) -> Result<&W::Started, PluginError> {
        Ok(&self.live()?.started)
    }

    fn live(&mut self) -> Result<&mut Live<W>, PluginError> {
        if self.live.is_none() {
            let live = self.prepared.instantiate(self.start, &self.cancel)?;
            // Lines its start-up wrote count toward the rate, not toward
            // the first call.
            live.store
                .data()
                .logs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take_counts();
            self.live = Some(live);
        }
        Ok(self.live.as_mut().expect("just filled"))
    }

    /// Run `f` against the instance with a deadline of `timeout`. A trap
    /// (or a panic in host code during the call) drops the instance and is
    /// reported as [`PluginError::Trap`].
    pub(crate) fn call<R>(
        &mut self,
        timeout: Duration,
        f: impl AsyncFnOnce(&W, &mut Store<PluginState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        self.call_lending(timeout, &mut [], async |b, store, _| f(b, store).await)
    }

    /// [`Instance::call`], lending `docs` to the plugin for the length of the
    /// call (as borrowed handles, in order, under the plugin's document
    /// limits). The documents come back whatever happens: a trap, the
    /// deadline or a panic leave them as the plugin left them.
    pub(crate) fn call_lending<R>(
        &mut self,
        timeout: Duration,
        docs: &mut [Document],
        f: impl AsyncFnOnce(&W, &mut Store<PluginState>, Vec<Resource<Document>>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        self.live()?;
        let loaded = &*self.prepared.loaded;
        let live = self.live.as_mut().expect("made live above");
        let state = live.store.data_mut();
        state.budget.start_call();
        // Room for the lent documents beside those the plugin may hold.
        state
            .docs
            .set_max_capacity(state.budget.documents_capacity() + docs.len());
        let mut lent = Vec::with_capacity(docs.len());
        for doc in docs.iter_mut() {
            doc.set_limits(state.budget.doc_limits);
            let own = state
                .docs
                .push(std::mem::take(doc))
                .map_err(|e| loaded.instantiate_error(e))?;
            state.lent.push(own.rep());
            lent.push(own);
        }
        let borrows = lent
            .iter()
            .map(|own| Resource::new_borrow(own.rep()))
            .collect();
        let bindings = &live.bindings;
        let result = loaded.run(&mut live.store, &live.cancel, timeout, async |store| {
            f(bindings, store, borrows).await
        });
        let state = live.store.data_mut();
        state.lent.clear();
        for (own, doc) in lent.into_iter().zip(docs.iter_mut()) {
            if let Ok(back) = state.docs.delete(own) {
                *doc = back;
            }
        }
        // Lines written during this call (those of a restart's `start` were
        // taken when it was made live).
        let log_lines = state
            .logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take_counts();
        self.log_lines = log_lines;
        if self.log_lines.1 > 0 {
            LogLinesDropped {
                plugin: &loaded.name,
                tenant: loaded.tenant.as_deref(),
                dropped: self.log_lines.1,
                per_second: loaded.spec.limits.log_lines_per_second(),
            }
            .emit();
        }
        match result {
            Ok(r) => {
                if loaded.spec.instance == InstancePolicy::Fresh {
                    // Nothing this call left behind reaches the next one.
                    self.live = None;
                }
                Ok(r)
            }
            Err(cause) => {
                PluginTrapped {
                    plugin: &loaded.name,
                    tenant: loaded.tenant.as_deref(),
                    cause: &cause,
                }
                .emit();
                self.live = None;
                self.restarts += 1;
                Err(PluginError::Trap {
                    plugin: loaded.name.to_string(),
                    cause,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_taken_from_the_last_panic() {
        let lines = [
            "starting".to_owned(),
            "thread '<unnamed>' panicked at src/lib.rs:3:5:".to_owned(),
            "boom".to_owned(),
            "note: run with `RUST_BACKTRACE=1`".to_owned(),
        ];
        assert_eq!(
            panic_message(&lines),
            "thread '<unnamed>' panicked at src/lib.rs:3:5: boom"
        );
        assert!(panic_message(&[]).contains("without a panic message"));
    }
}
