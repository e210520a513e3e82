//! Long-running workers and indexers for Kafka mode (`weir worker`,
//! `weir indexer`): no connector, no run; they serve until told to stop.

use std::sync::Arc;
use std::thread;

use super::pipeline::{join_all, spawn_in_span};
use super::stages::start_stages;
use super::stop::Abort;
use super::{LoadedPlugins, Runner, StopReason};
use crate::messenger::{IndexerMessenger, WorkerMessenger};

/// Tells serving workers and indexers to finish the document at hand, commit
/// what is complete, and stop. Clone it into a signal handler.
#[derive(Debug, Clone, Default)]
pub struct Shutdown(Abort);

impl Shutdown {
    pub fn trigger(&self) {
        self.0.trigger(StopReason::Shutdown);
    }

    /// Whether the process was told to stop (or must stop).
    pub fn is_triggered(&self) -> bool {
        self.0.is_set()
    }

    /// Why serving ended: `Ok` for a requested shutdown.
    fn outcome(&self) -> Result<(), String> {
        match self.0.reason() {
            None | Some(StopReason::Shutdown) => Ok(()),
            Some(reason) => Err(reason.to_string()),
        }
    }
}

impl Runner {
    /// Run one worker per messenger for `pipeline` until `shutdown`, or until
    /// one of them hits a fatal error (then all stop and the error is returned).
    pub fn serve_workers(
        &self,
        plugins: &LoadedPlugins,
        pipeline: &str,
        messengers: Vec<Box<dyn WorkerMessenger>>,
        shutdown: &Shutdown,
    ) -> Result<(), String> {
        self.reloads.starting(plugins);
        let mut workers = Vec::with_capacity(messengers.len());
        for messenger in messengers {
            workers.push((
                start_stages(plugins, &self.config, &self.scope(pipeline))?,
                messenger,
            ));
        }
        let pipeline: Arc<str> = Arc::from(pipeline);
        thread::scope(|scope| {
            let handles = self.spawn_workers(scope, &pipeline, workers, &shutdown.0, None);
            join_all(handles, &shutdown.0, "a worker");
        });
        shutdown.outcome()
    }

    /// Run one indexer instance per messenger for `pipeline` (each a
    /// consumer of the destination topic, numbered for the plugin) until
    /// `shutdown`, or until one hits a fatal error (then all stop).
    pub fn serve_indexers(
        &self,
        plugins: &LoadedPlugins,
        pipeline: &str,
        messengers: Vec<Box<dyn IndexerMessenger>>,
        shutdown: &Shutdown,
    ) -> Result<(), String> {
        let count = messengers.len();
        let mut indexers = Vec::with_capacity(count);
        for (index, messenger) in messengers.into_iter().enumerate() {
            let started = self.start_indexer(plugins, pipeline, (index, count))?;
            indexers.push(started.into_loop(
                Arc::from(pipeline),
                messenger,
                self.stats(),
                shutdown.0.clone(),
                shutdown.0.clone(),
            ));
        }
        thread::scope(|scope| {
            let handles: Vec<_> = indexers
                .into_iter()
                .enumerate()
                .map(|(i, indexer)| {
                    let name = format!("weir-indexer-{i}");
                    spawn_in_span(scope, &name, move || {
                        // A panic stops the others now, not when they are joined.
                        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            indexer.run();
                        }));
                        if ran.is_err() {
                            shutdown.0.trigger("an indexer thread panicked");
                        }
                    })
                })
                .collect();
            for handle in handles {
                let _ = handle.join();
            }
        });
        shutdown.outcome()
    }

    /// Run worker–indexer pairs of `pipeline` (Hybrid mode) until `shutdown`
    /// or a fatal error. On shutdown the workers stop taking documents, and
    /// each indexer indexes what its worker handed it before the worker's
    /// last commit; a fatal error in any worker or indexer stops them all.
    pub fn serve_hybrid(
        &self,
        plugins: &LoadedPlugins,
        pipeline: &str,
        pairs: Vec<(Box<dyn WorkerMessenger>, Box<dyn IndexerMessenger>)>,
        shutdown: &Shutdown,
    ) -> Result<(), String> {
        let count = pairs.len();
        self.reloads.starting(plugins);
        let mut workers = Vec::with_capacity(count);
        let mut indexers = Vec::with_capacity(count);
        // Each pair's indexer is an instance of its own (a file indexer
        // writes a file per pair).
        for (index, (worker, indexer)) in pairs.into_iter().enumerate() {
            workers.push((
                start_stages(plugins, &self.config, &self.scope(pipeline))?,
                worker,
            ));
            indexers.push((
                self.start_indexer(plugins, pipeline, (index, count))?,
                indexer,
            ));
        }
        let pipeline: Arc<str> = Arc::from(pipeline);
        // Indexers stop on their own fatal errors only: on shutdown they
        // finish their queues, which close as their workers stop.
        let indexers_abort = Abort::default();
        thread::scope(|scope| {
            let indexer_threads: Vec<_> = indexers
                .into_iter()
                .enumerate()
                .map(|(i, (started, messenger))| {
                    let indexer = started.into_loop(
                        Arc::clone(&pipeline),
                        messenger,
                        self.stats(),
                        indexers_abort.clone(),
                        shutdown.0.clone(),
                    );
                    let (failed, workers_abort) = (indexers_abort.clone(), shutdown.0.clone());
                    spawn_in_span(scope, &format!("weir-indexer-{i}"), move || {
                        indexer.run();
                        if let Some(reason) = failed.reason() {
                            workers_abort.trigger(reason.clone());
                        }
                    })
                })
                .collect();
            let handles = self.spawn_workers(scope, &pipeline, workers, &shutdown.0, None);
            join_all(handles, &shutdown.0, "a worker");
            join_all(indexer_threads, &shutdown.0, "an indexer");
        });
        shutdown.outcome()
    }
}
