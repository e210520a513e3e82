//! The three plugin kinds, each a thin typed layer over [`Instance`]: stages,
//! connectors and indexers.

use wasmtime::Store;
use wasmtime::component::{InstancePre, Resource};

use super::bindings::connector::{Connector, ConnectorPre};
use super::bindings::stage::{Stage, StagePre};
use super::bindings::{ConfigIssue, GuestError};
use super::error::{PluginError, TrapCause};
use super::host::PluginState;
use super::indexer_batch::{BatchFailure, BatchFormat, DocumentFailure, with_entries};
use super::instance::{Instance, Loaded, Prepared, World};
use super::packed::{IndexerWorld, Packed};
use super::resources::{PublishSink, Publisher};
use crate::core::document::Document;
use crate::core::text::clip_message;

macro_rules! world {
    ($world:ty, $pre:ident, $kind:literal, $api:literal, $started:ty, |$b:ident, $store:ident, $config:ident| $start:expr) => {
        impl World for $world {
            const KIND: &'static str = $kind;
            const API: &'static str = $api;
            type Pre = $pre<PluginState>;
            type Started = $started;
            fn pre(pre: InstancePre<PluginState>) -> wasmtime::Result<Self::Pre> {
                $pre::new(pre)
            }
            async fn instantiate(
                pre: &Self::Pre,
                store: &mut Store<PluginState>,
            ) -> wasmtime::Result<Self> {
                pre.instantiate_async(store).await
            }
            async fn start(
                &self,
                $store: &mut Store<PluginState>,
                $config: &str,
            ) -> wasmtime::Result<Result<$started, GuestError>> {
                let $b = self;
                $start
            }
        }
    };
}
world!(
    Stage,
    StagePre,
    "stage",
    "stage-api",
    (),
    |b, store, config| b.weir_plugin_stage_api().call_start(store, config).await
);
world!(
    Connector,
    ConnectorPre,
    "connector",
    "connector-api",
    (),
    |_b, _store, _config| Ok(Ok(()))
);

/// A plugin kind's two public types: the loaded plugin (cloned into each
/// worker) and its instance, with what they share.
macro_rules! plugin_kind {
    ($(#[$doc:meta])* $plugin:ident, $(#[$idoc:meta])* $instance:ident, $world:ty, $api:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $plugin {
            prepared: Prepared<$world>,
        }

        impl std::fmt::Debug for $plugin {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($plugin)).field("name", &self.name()).finish()
            }
        }

        impl $plugin {
            pub(crate) fn load(loaded: Loaded) -> Result<Self, PluginError> {
                Ok(Self {
                    prepared: Prepared::new(loaded)?,
                })
            }

            /// The name the config gives the plugin.
            pub fn name(&self) -> &str {
                &self.prepared.loaded.name
            }

            /// Every problem the plugin finds in its config, asked of a
            /// throw-away instance.
            pub fn check_config(&self) -> Result<Vec<ConfigIssue>, PluginError> {
                check_config(&self.prepared, async |b, store, config| {
                    b.$api().call_check_config(store, config).await
                })
            }
        }

        $(#[$idoc])*
        pub struct $instance {
            inner: Instance<$world>,
        }

        impl std::fmt::Debug for $instance {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($instance))
                    .field("name", &&*self.inner.loaded().name)
                    .field("restarts", &self.inner.restarts)
                    .finish()
            }
        }
    };
}

plugin_kind!(
    /// A loaded connector plugin.
    ConnectorPlugin,
    /// A connector instance, driven through one run's lifecycle.
    ConnectorInstance,
    Connector,
    weir_plugin_connector_api
);
plugin_kind!(
    /// A loaded indexer plugin.
    IndexerPlugin,
    /// An indexer instance.
    IndexerInstance,
    IndexerWorld,
    weir_plugin_indexer_api
);

/// A guest's own error as a host error.
pub(super) fn guest_error(plugin: &str, error: GuestError) -> PluginError {
    let plugin = plugin.to_owned();
    match error {
        GuestError::Document(message) => PluginError::Document {
            plugin,
            message: clip_message(message),
            transient: false,
        },
        GuestError::Transient(message) => PluginError::Document {
            plugin,
            message: clip_message(message),
            transient: true,
        },
        GuestError::Fatal(message) => PluginError::Fatal {
            plugin,
            message: clip_message(message),
        },
    }
}

/// Flatten a call's outcome: a trap is already a [`PluginError`]; a guest
/// error becomes one.
pub(super) fn flatten<T>(
    plugin: &str,
    r: Result<Result<T, GuestError>, PluginError>,
) -> Result<T, PluginError> {
    r?.map_err(|e| guest_error(plugin, e))
}

/// Run `check-config` on a throw-away instance (not started).
pub(super) fn check_config<W: World>(
    prepared: &Prepared<W>,
    call: impl AsyncFnOnce(&W, &mut Store<PluginState>, &str) -> wasmtime::Result<Vec<ConfigIssue>>,
) -> Result<Vec<ConfigIssue>, PluginError> {
    let mut instance = Instance::start(prepared.clone(), false)?;
    let loaded = instance.loaded();
    let (timeout, config) = (
        loaded.spec.limits.call_timeout(),
        loaded.config_json.clone(),
    );
    let issues = instance.call(timeout, async |b, store| call(b, store, &config).await)?;
    Ok(issues
        .into_iter()
        .map(|i| ConfigIssue {
            path: clip_message(i.path),
            message: clip_message(i.message),
        })
        .collect())
}

// ---- connector ----

impl ConnectorPlugin {
    /// Whether it keeps state between runs (it imports `weir:plugin/sync`):
    /// a syncing connector, whose documents the host stamps with their
    /// sync and whose full syncs clean up.
    pub fn keeps_state(&self) -> bool {
        self.prepared.loaded.imports("sync")
    }

    /// Whether it consumes sources that never end (it imports
    /// `weir:plugin/messages`, world `streaming-connector`): its run opens
    /// the sources its config grants, and its `execute` has no deadline.
    pub fn streams(&self) -> bool {
        self.prepared.loaded.imports("messages")
    }

    /// A fresh instance for one run.
    pub fn instantiate(&self) -> Result<ConnectorInstance, PluginError> {
        Ok(ConnectorInstance {
            inner: Instance::start(self.prepared.clone(), false)?,
        })
    }
}

impl ConnectorInstance {
    fn lifecycle_call(
        &mut self,
        timeout: std::time::Duration,
        f: impl AsyncFnOnce(
            &Connector,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<(), GuestError>>,
    ) -> Result<(), PluginError> {
        let r = self.inner.call(timeout, f);
        flatten(&self.inner.loaded().name, r)
    }

    /// Keep the connector's state in `state` (the `sync` interface) for
    /// this instance's calls.
    pub fn set_state(
        &mut self,
        state: std::sync::Arc<dyn super::host::ConnectorState>,
    ) -> Result<(), PluginError> {
        self.inner.state_mut()?.sync = Some(state);
        Ok(())
    }

    /// Give this instance's calls the run's sources and messages in flight
    /// (the `messages` interface).
    pub fn set_messages(
        &mut self,
        session: std::sync::Arc<dyn super::host::MessageSession>,
    ) -> Result<(), PluginError> {
        self.inner.state_mut()?.messages = Some(session);
        Ok(())
    }

    pub fn pre_execute(&mut self, run_id: &str) -> Result<(), PluginError> {
        let loaded = self.inner.loaded();
        let (timeout, config) = (
            loaded.spec.limits.call_timeout(),
            loaded.config_json.clone(),
        );
        self.lifecycle_call(timeout, async |b, store| {
            b.weir_plugin_connector_api()
                .call_pre_execute(store, &config, run_id)
                .await
        })
    }

    /// A handle that stops this connector's call in progress (its
    /// `execute`) from another thread; the instance is then discarded.
    pub fn canceller(&self) -> super::Cancel {
        self.inner.canceller()
    }

    /// Run the connector, publishing into `sink`, for at most `timeout` (see
    /// the `execute_timeout` limit). Documents it publishes get `run_id`
    /// unless they carry one.
    pub fn execute(
        &mut self,
        run_id: &str,
        sink: Box<dyn PublishSink>,
        timeout: std::time::Duration,
    ) -> Result<(), PluginError> {
        let publisher = Publisher::new(sink, run_id.to_owned());
        let result = self.lifecycle_call(timeout, async |b, store| {
            let own = store.data_mut().table.push(publisher)?;
            let result = b
                .weir_plugin_connector_api()
                .call_execute(&mut *store, Resource::new_borrow(own.rep()))
                .await;
            store.data_mut().table.delete(own)?;
            result
        });
        // A cancellation was for `execute`: `post-execute` and `close` run.
        self.canceller().reset();
        // Its deadline is the execute limit's, not a call's: name that one.
        result.map_err(|e| match e {
            PluginError::Trap {
                plugin,
                cause: TrapCause::Deadline(limit),
            } => PluginError::Trap {
                plugin,
                cause: TrapCause::ExecuteDeadline(limit),
            },
            other => other,
        })
    }

    pub fn post_execute(&mut self) -> Result<(), PluginError> {
        let timeout = self.inner.loaded().spec.limits.call_timeout();
        self.lifecycle_call(timeout, async |b, store| {
            b.weir_plugin_connector_api().call_post_execute(store).await
        })
    }

    pub fn close(&mut self) -> Result<(), PluginError> {
        let timeout = self.inner.loaded().spec.limits.call_timeout();
        self.lifecycle_call(timeout, async |b, store| {
            b.weir_plugin_connector_api().call_close(store).await
        })
    }
}

// ---- indexer ----

impl IndexerPlugin {
    /// A started instance.
    pub fn instantiate(&self) -> Result<IndexerInstance, PluginError> {
        Ok(IndexerInstance {
            inner: Instance::start(self.prepared.clone(), true)?,
        })
    }

    /// A started instance, number `index` of the `count` serving one
    /// pipeline: the guest reads them from `WEIR_INDEXER_INSTANCE` and
    /// `WEIR_INDEXER_INSTANCES` (and writes, say, a file of its own).
    pub fn instantiate_numbered(
        &self,
        index: usize,
        count: usize,
    ) -> Result<IndexerInstance, PluginError> {
        if count <= 1 {
            return self.instantiate();
        }
        let prepared = self.prepared.with_env(&[
            ("WEIR_INDEXER_INSTANCE", index.to_string()),
            ("WEIR_INDEXER_INSTANCES", count.to_string()),
        ]);
        Ok(IndexerInstance {
            inner: Instance::start(prepared, true)?,
        })
    }
}

impl IndexerInstance {
    pub fn validate_connection(&mut self) -> Result<(), PluginError> {
        let timeout = self.inner.loaded().spec.limits.call_timeout();
        let r = self.inner.call(timeout, async |b, store| {
            b.weir_plugin_indexer_api()
                .call_validate_connection(store)
                .await
        });
        flatten(&self.inner.loaded().name, r)
    }

    /// A handle that stops this indexer's call in progress from another
    /// thread (and its later calls, until reset).
    pub fn canceller(&self) -> super::Cancel {
        self.inner.canceller()
    }

    /// How the backend wants its batches.
    pub fn batch_format(&mut self) -> Result<BatchFormat, PluginError> {
        self.inner.started().cloned()
    }

    /// Send `docs` to the backend as one batch, in one call, each prepared
    /// here as the backend asked (JSON text, picked field values).
    ///
    /// `Ok(Ok(failures))`: the batch went through except for `failures`
    /// (by position, each position at most once); `Ok(Err(_))`: the backend
    /// refused the whole batch; `Err`: the plugin failed (trap or its own
    /// error), which fails the batch too.
    pub fn send_batch(
        &mut self,
        docs: &[Document],
    ) -> Result<Result<Vec<DocumentFailure>, BatchFailure>, PluginError> {
        let timeout = self.inner.loaded().spec.limits.call_timeout();
        // A few names, cloned so the entries can borrow them beside the call.
        let format = self.inner.started()?.clone();
        let unwanted = |d: &Document| {
            (!format.deletes() && d.is_deleted())
                || (!format.sweeps() && crate::core::sync::is_sweep(d))
        };
        if docs.iter().any(unwanted) {
            return self.send_without_markers(docs, unwanted);
        }
        let count = docs.len();
        let inner = &mut self.inner;
        // Packed when the backend takes it, and every piece of the batch
        // can be told by a length (always, short of 4 GiB in one value).
        let packed = inner
            .bindings()?
            .packs()
            .then(|| Packed::of(docs, &format))
            .flatten();
        let sent = match packed {
            Some(packed) => inner.call(timeout, async |b, store| {
                b.index_packed(store, &packed).await
            }),
            None => with_entries(docs, &format, |entries| {
                inner.call(timeout, async |b, store| {
                    b.weir_plugin_indexer_api()
                        .call_index_batch(store, entries)
                        .await
                })
            }),
        }?;
        let name = &self.inner.loaded().name;
        Ok(match sent {
            Ok(refused) => {
                let mut seen = vec![false; count];
                let mut failures = Vec::with_capacity(refused.len().min(count));
                let mut repeated = 0u64;
                for f in refused {
                    let index = f.index as usize;
                    match seen.get_mut(index) {
                        Some(seen) if !*seen => *seen = true,
                        Some(_) => {
                            // Counted, and said once below: a plugin that
                            // repeats positions cannot flood the log.
                            repeated += 1;
                            continue;
                        }
                        None => {
                            return Err(PluginError::Document {
                                plugin: name.to_string(),
                                message: format!(
                                    "reported a failure at position {index} of a batch of {count} documents: the whole batch fails"
                                ),
                                transient: false,
                            });
                        }
                    }
                    failures.push(DocumentFailure {
                        index,
                        message: clip_message(f.message),
                        status: f.status,
                        transient: f.transient,
                    });
                }
                if repeated > 0 {
                    tracing::warn!(plugin = %name, repeated, "indexer reported batch positions more than once; the first report of each counts");
                }
                Ok(failures)
            }
            Err(e) => Err(BatchFailure {
                message: clip_message(e.message),
                status: e.status,
                connection_failed: e.connection_failed,
            }),
        })
    }

    /// A batch holding markers the backend does not take: deletion markers
    /// for one that does not delete fail (they would be indexed as empty
    /// documents, in place of the documents they should remove); sweep
    /// markers for one that does not sweep are done with a warning (a
    /// full sync's sweep is a cleanup the backend cannot do, not a
    /// document lost). The rest go.
    fn send_without_markers(
        &mut self,
        docs: &[Document],
        unwanted: impl Fn(&Document) -> bool,
    ) -> Result<Result<Vec<DocumentFailure>, BatchFailure>, PluginError> {
        let (markers, kept): (Vec<usize>, Vec<usize>) =
            (0..docs.len()).partition(|&i| unwanted(&docs[i]));
        let name = self.inner.loaded().name.clone();
        let (sweeps, markers): (Vec<usize>, Vec<usize>) = markers
            .into_iter()
            .partition(|&i| crate::core::sync::is_sweep(&docs[i]));
        for &i in &sweeps {
            tracing::warn!(
                indexer = %name,
                sweep = %crate::core::text::for_log(docs[i].id()),
                "indexer does not sweep after a full sync (its batch format does not pick `_weir_sweep`): what the sync indexed before and its source no longer holds stays in the index"
            );
        }
        let rest: Vec<Document> = kept.iter().map(|&i| docs[i].clone()).collect();
        let mut failures = if rest.is_empty() {
            Vec::new()
        } else {
            match self.send_batch(&rest)? {
                Ok(failures) => failures,
                Err(failure) => return Ok(Err(failure)),
            }
        };
        for failure in &mut failures {
            failure.index = kept[failure.index];
        }
        let name = &self.inner.loaded().name;
        failures.extend(markers.into_iter().map(|index| DocumentFailure {
            index,
            message: format!(
                "`{}` is a deletion marker, and indexer `{name}` does not delete (its batch format does not pick `_deleted`)",
                docs[index].id()
            ),
            status: None,
            transient: false,
        }));
        failures.sort_by_key(|f| f.index);
        Ok(Ok(failures))
    }

    pub fn close(&mut self) -> Result<(), PluginError> {
        let timeout = self.inner.loaded().spec.limits.call_timeout();
        let r = self.inner.call(timeout, async |b, store| {
            b.weir_plugin_indexer_api().call_close(store).await
        });
        flatten(&self.inner.loaded().name, r)
    }
}
