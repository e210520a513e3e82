//! Starting a pipeline's parts in this process: stage instances for each
//! worker, indexer instances connected to their backend, and the threads
//! that run them. Shared by local runs and by serving processes.

use std::sync::Arc;
use std::thread;

use super::dead_letters::DeadLetterFile;
use super::indexer::IndexerLoop;
use super::stages::StageSlot;
use super::stop::Abort;
use super::worker::{self, Worker};
use super::{LoadedPlugins, Runner};
use crate::telemetry::RunStats;
use crate::telemetry::meters::{IndexerMeters, PipelineMeters, Scope};

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

impl Runner {
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
                    reloads: self.reloads.clone(),
                    generation: super::reload::FIRST_GENERATION,
                    taps: self.taps.clone(),
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
}

/// Spawn a named scoped thread that runs `f` inside the caller's tracing span.
pub(super) fn spawn_in_span<'scope, T: Send + 'scope>(
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

/// Wait for each of `threads`; one that panicked stops the rest of its
/// pipeline through `abort`, saying which kind of thread (`what`) it was.
pub(super) fn join_all(threads: Vec<thread::ScopedJoinHandle<'_, ()>>, abort: &Abort, what: &str) {
    for handle in threads {
        if handle.join().is_err() {
            abort.trigger(format!("{what} thread panicked"));
        }
    }
}
