//! One sandboxed instance of a plugin, whatever its kind: its store (memory
//! cap, deadline, WASI grants), its replacement after a trap, and the
//! classification of a failed call.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::{Component, InstancePre, Resource};

use super::{PluginLabel, RuntimeInner};
use crate::telemetry::events::{LogLinesDropped, PluginTrapped};

/// Ticks past its deadline before a computing guest is interrupted: a host
/// call that gave up at the deadline gets to return its error first.
const INTERRUPT_SLACK_TICKS: u32 = 4;
use super::bindings::GuestError;
use super::error::{PluginError, TrapCause};
use super::grant::OpenedDir;
use super::host::{HttpAllow, PluginState};
use super::spec::{InstancePolicy, PluginSpec};
use crate::core::document::Document;

/// A compiled plugin with its name and spec, shared by all its instances.
#[derive(Clone)]
pub(crate) struct Loaded {
    pub(super) runtime: Arc<RuntimeInner>,
    pub(crate) name: Arc<str>,
    /// The tenant whose run the plugin serves: a label of its metrics.
    pub(crate) tenant: Option<Arc<str>>,
    pub(crate) spec: PluginSpec,
    component: Component,
    /// The SHA-256 of the bytes the component was compiled from: what
    /// every instance of it runs, whatever the file holds now.
    pub(crate) sha256: [u8; 32],
    pub(super) http_allow: Arc<[HttpAllow]>,
    /// `grants.sql`: the databases the plugin may query, by name.
    pub(super) sql_grants: Arc<std::collections::BTreeMap<String, String>>,
    /// The plugin's config as JSON text, as handed to `check-config` and `start`.
    pub(crate) config_json: String,
    /// The log rate every instance of the plugin shares.
    pub(super) log_bucket: Arc<std::sync::Mutex<super::host::LogBucket>>,
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
        let (component, sha256) = runtime
            .cache
            .load(&runtime.engine, &spec.path, spec.sha256.as_deref())
            .map_err(|e| PluginError::Load {
                plugin: name.to_owned(),
                path: spec.path.clone(),
                message: format!("{e:#}"),
            })?;
        let sql_grants = Arc::new(spec.grants.sql.clone());
        let log_bucket = super::host::LogBucket::shared(spec.limits.log_lines_per_second());
        Ok(Self {
            runtime,
            name: Arc::from(name),
            tenant: label.tenant.map(Arc::from),
            config_json: spec.config.to_string(),
            spec,
            component,
            sha256,
            log_bucket,
            http_allow: http_allow.into(),
            sql_grants,
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

    /// Whether the component exports the contract interface `api`.
    pub(super) fn exports(&self, api: &str) -> bool {
        super::contract::exports(&self.component, &self.runtime.engine, api)
    }

    /// Whether the component imports the contract interface `api`.
    pub(super) fn imports(&self, api: &str) -> bool {
        super::contract::imports(&self.component, &self.runtime.engine, api)
    }

    pub(crate) fn instantiate_error(&self, e: impl std::fmt::Display) -> PluginError {
        PluginError::Instantiate {
            plugin: self.name.to_string(),
            message: e.to_string(),
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
        self.end_queries(store);
        match outcome {
            Ok(Some(Ok(r))) => Ok(r),
            Ok(Some(Err(error))) => Err(self.classify(error, store, timeout)),
            Ok(None) if cancel.is_cancelled() => Err(TrapCause::Cancelled),
            Ok(None) => Err(TrapCause::Deadline(timeout)),
            Err(panic) => Err(TrapCause::HostPanic(crate::core::text::panic_text(&*panic))),
        }
    }

    /// A database query lasts no longer than the call that opened it: its
    /// transaction is rolled back as the call returns, or its connection
    /// dropped when that cannot be done in time.
    fn end_queries(&self, store: &mut Store<PluginState>) {
        let sql = &mut store.data_mut().sql;
        if !sql.has_open() {
            return;
        }
        // Not cut by the call's own cancel: a cancelled call is when a
        // statement most needs stopping on the server.
        let until = crate::core::time::deadline_after(super::host::END_QUERIES_WAIT);
        if self
            .runtime
            .block_on_until(until, &super::Cancel::default(), sql.end_queries())
            .is_none()
        {
            sql.drop_open();
        }
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

/// Function `name` of interface `interface`, when the instance exports
/// that interface, checked to be of type `(P) -> R`. A plugin that exports
/// the interface without it, or in another shape, is refused here rather
/// than failing every call.
pub(crate) fn typed_export<P, R>(
    instance: &wasmtime::component::Instance,
    store: &mut Store<PluginState>,
    interface: &str,
    name: &str,
) -> wasmtime::Result<Option<wasmtime::component::Func>>
where
    P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower,
    R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift,
{
    let Some(exported) = instance.get_export_index(&mut *store, None, interface) else {
        return Ok(None);
    };
    let func = instance
        .get_export_index(&mut *store, Some(&exported), name)
        .and_then(|func| instance.get_func(&mut *store, func))
        .ok_or_else(|| wasmtime::format_err!("it exports `{interface}` without `{name}`"))?;
    func.typed::<P, R>(&*store)
        .map_err(|e| wasmtime::format_err!("its `{name}` is not the contract's: {e}"))?;
    Ok(Some(func))
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

/// How a call lends documents to the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lending {
    /// As borrowed handles, which end with the call (`process-document`).
    Borrowed,
    /// As owned handles that stay the host's (`process-batch`): dropping one
    /// gives nothing up, and handing one on hands on a copy.
    Owned,
    /// As one `batch` handle (`process-lent`): the closure gets no document
    /// handles, and the plugin holds one only once it asks for it, owned
    /// as above.
    ByPosition,
}

/// The handles a call lending `count` documents as `lending` says may have
/// on them at once.
pub(crate) fn lent_handles(lending: Lending, count: usize) -> usize {
    match lending {
        Lending::Borrowed | Lending::Owned => count,
        Lending::ByPosition => count
            .saturating_mul(super::host::MAX_HANDLES_PER_DOCUMENT as usize)
            .saturating_add(1),
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

    /// The live instance's store data (instantiating it if needed).
    pub(crate) fn state_mut(&mut self) -> Result<&mut PluginState, PluginError> {
        Ok(self.live()?.store.data_mut())
    }

    /// The live instance's bindings (instantiating it if needed).
    pub(crate) fn bindings(&mut self) -> Result<&W, PluginError> {
        Ok(&self.live()?.bindings)
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
        self.call_lending(timeout, &mut [], Lending::Borrowed, async |b, store, _| {
            f(b, store).await
        })
    }

    /// [`Instance::call`], lending `docs` to the plugin for the length of the
    /// call (as handles of the kind `lending` says, in order, under the
    /// plugin's document limits). The documents come back whatever happens:
    /// a trap, the deadline or a panic leave them as the plugin left them,
    /// except that a batch of several owned handles comes back as it was
    /// before the call (so each document can be run again by itself).
    pub(crate) fn call_lending<R>(
        &mut self,
        timeout: Duration,
        docs: &mut [Document],
        lending: Lending,
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
        // And room in the engine for every handle on them the contract
        // allows (a batch lent by position: up to
        // `MAX_HANDLES_PER_DOCUMENT` on each document, and the batch's
        // own), so the host's own bounds, which name themselves, are what
        // stop a plugin that asks for more, never wasmtime's store-wide cap.
        let handles = state
            .budget
            .component_handles()
            .saturating_add(lent_handles(lending, docs.len()));
        live.store.set_max_component_handles(handles);
        let state = live.store.data_mut();
        let mut lent = Vec::with_capacity(docs.len());
        for doc in docs.iter_mut() {
            doc.set_limits(state.budget.doc_limits);
            let own = state
                .docs
                .push(std::mem::take(doc))
                .map_err(|e| loaded.instantiate_error(e))?;
            lent.push(own);
        }
        let owned = !matches!(lending, Lending::Borrowed);
        state.journal.start(
            lent.iter().map(Resource::rep),
            owned && docs.len() > 1,
            !matches!(lending, Lending::ByPosition),
        );
        let handles = lent
            .iter()
            .filter_map(|own| match lending {
                Lending::Borrowed => Some(Resource::new_borrow(own.rep())),
                Lending::Owned => Some(Resource::new_own(own.rep())),
                Lending::ByPosition => None,
            })
            .collect();
        let bindings = &live.bindings;
        let result = loaded.run(&mut live.store, &live.cancel, timeout, async |store| {
            f(bindings, store, handles).await
        });
        let state = live.store.data_mut();
        // Handles the plugin kept past the call would reach the documents of
        // later calls: the instance is not used again.
        let kept = if owned { state.journal.kept() } else { 0 };
        let before = state.journal.finish();
        for ((own, doc), before) in lent.into_iter().zip(docs.iter_mut()).zip(before) {
            if let Ok(back) = state.docs.delete(own) {
                *doc = back;
                if let Some(before) = before.filter(|_| result.is_err()) {
                    before.restore(doc);
                }
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
                if kept > 0 {
                    tracing::warn!(
                        plugin = %loaded.name,
                        kept,
                        "the plugin kept handles on documents of its batch past the call; a new instance takes the next call"
                    );
                }
                if loaded.spec.instance == InstancePolicy::Fresh || kept > 0 {
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
