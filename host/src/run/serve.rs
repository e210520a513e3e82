//! Long-running workers and indexers for Kafka mode (`weir worker`,
//! `weir indexer`): no connector, no run; they serve until told to stop.

use std::sync::Arc;
use std::thread;

use super::publisher::Abort;
use super::{LoadedPlugins, Runner, spawn_workers, start_stages};
use crate::messenger::{IndexerMessenger, WorkerMessenger};

/// The reason recorded when a process is asked to stop.
const SHUTDOWN: &str = "shutdown requested";

/// Tells serving workers and indexers to finish the document at hand, commit
/// what is complete, and stop. Clone it into a signal handler.
#[derive(Debug, Clone, Default)]
pub struct Shutdown(Abort);

impl Shutdown {
    pub fn trigger(&self) {
        self.0.trigger(SHUTDOWN);
    }

    /// Why serving ended: `Ok` for a requested shutdown.
    fn outcome(&self) -> Result<(), String> {
        match self.0.reason() {
            None | Some(SHUTDOWN) => Ok(()),
            Some(reason) => Err(reason.to_owned()),
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
        let mut workers = Vec::with_capacity(messengers.len());
        for messenger in messengers {
            workers.push((start_stages(plugins, pipeline)?, messenger));
        }
        let pipeline: Arc<str> = Arc::from(pipeline);
        thread::scope(|scope| {
            let handles = spawn_workers(scope, &pipeline, workers, &self.stats(), &shutdown.0);
            for handle in handles {
                if handle.join().is_err() {
                    shutdown.0.trigger("a worker thread panicked");
                }
            }
        });
        shutdown.outcome()
    }

    /// Run the indexer of `pipeline` until `shutdown` or a fatal error.
    pub fn serve_indexer(
        &self,
        plugins: &LoadedPlugins,
        pipeline: &str,
        messenger: Box<dyn IndexerMessenger>,
        shutdown: &Shutdown,
    ) -> Result<(), String> {
        let started = self.start_indexer(plugins, pipeline)?;
        let indexer = started.into_loop(
            Arc::from(pipeline),
            messenger,
            self.stats(),
            shutdown.0.clone(),
        );
        indexer.run();
        shutdown.outcome()
    }
}
