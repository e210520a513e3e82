//! One connector's run: start its pipeline's indexers and workers, drive the
//! connector's lifecycle while counting events, and decide when it is done
//! (complete, failed, stalled, timed out or interrupted).

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::accounting::{Accounting, Skip};
use super::dead_letters::DeadLetterFile;
use super::pipeline::{join_all, spawn_in_span};
use super::publisher::Publish;
use super::stages::start_stages;
use super::state::Ledger;
use super::stop::Abort;
use super::sync::SyncRun;
use super::{LoadedPlugins, Runner, StopReason, replay, watch};
use crate::config::ConnectorConfig;
use crate::core::document::Document;
use crate::messenger::{MessengerParts, Polled, PublisherMessenger};
use crate::plugin::ConnectorInstance;
use crate::telemetry::RunStats;

/// Events counted under one lock of the accounting.
const EVENT_CHUNK: usize = 256;

/// Where a connector run's documents come from.
pub(crate) enum Source {
    /// The config entry's connector plugin.
    Plugin,
    /// Documents read back (`weir replay`).
    Documents(Vec<Document>),
}

/// A [`Source`], ready: a connector with its state and sync (a syncing
/// connector's), or documents.
enum Started {
    Plugin(Box<ConnectorInstance>, Option<Synced>),
    Documents(Vec<Document>),
}

/// A syncing connector's state and sync.
struct Synced {
    ledger: Arc<Ledger>,
    sync: Arc<SyncRun>,
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
    /// A resumed run's connector: whether it had published its last
    /// document, and what it had published.
    resumed: Option<(bool, &'a Arc<Skip>)>,
    /// A syncing connector's sync.
    sync: Option<&'a Arc<SyncRun>>,
    /// A continuous connector (a streaming one, whose sources never end,
    /// or `continuous = true`): no deadline but its own execute limit.
    streaming: bool,
}

impl Runner {
    /// Start the indexer and workers, run the connector's lifecycle, wait for
    /// its documents, and shut the pipeline down. `Err` is why it failed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn drive_connector(
        &self,
        c: &ConnectorConfig,
        source: Source,
        plugins: &LoadedPlugins,
        run_id: &str,
        accounting: &Arc<Accounting>,
        dead_letters: Option<&Arc<DeadLetterFile>>,
    ) -> Result<(), StopReason> {
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
        let remote = self.messengers.workers_are_remote();
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
        self.reloads.starting(plugins);
        let mut workers = Vec::with_capacity(worker_messengers.len());
        for messenger in worker_messengers {
            workers.push((
                start_stages(plugins, &self.config, &self.scope(&c.pipeline))?,
                messenger,
            ));
        }

        // What an earlier runner of this run did (a resumed Kafka run).
        let earlier = publisher.resumed();
        // A streaming connector's sources, opened for its run.
        let mut streams: Option<Arc<super::deliveries::Deliveries>> = None;
        let mut source = match source {
            Source::Plugin => {
                let plugin = plugins
                    .connectors
                    .get(&c.name)
                    .ok_or_else(|| format!("connector `{}` was not loaded", c.name))?;
                let mut connector = plugin
                    .instantiate()
                    .map_err(|e| format!("the connector could not start: {e}"))?;
                // Only a connector that keeps state has any: no store is
                // opened (no file made) for one that does not.
                let synced = if plugin.keeps_state() {
                    let opened = super::sync::open(
                        self.states.as_ref(),
                        self.sync_id.as_deref(),
                        c,
                        accounting,
                        super::sync::How {
                            full: self.full_sync,
                            max_delete_share: self.max_delete_share(),
                            track_source: self.config.state.track_source,
                            resuming: earlier.is_some(),
                        },
                    )?;
                    let ledger = Arc::new(opened.ledger);
                    super::family::open(
                        self.states.as_ref(),
                        &opened.sync.scope,
                        c,
                        accounting,
                        &ledger,
                        run_id,
                    )?;
                    connector
                        .set_state(Arc::clone(&ledger) as Arc<dyn crate::plugin::ConnectorState>)
                        .map_err(|e| format!("the connector could not start: {e}"))?;
                    Some(Synced {
                        ledger,
                        sync: Arc::new(opened.sync),
                    })
                } else {
                    None
                };
                if plugin.streams() {
                    let deliveries =
                        super::deliveries::open(c, run_id, accounting, dead_letters, &self.pushes)?;
                    connector
                        .set_messages(
                            Arc::clone(&deliveries) as Arc<dyn crate::plugin::MessageSession>
                        )
                        .map_err(|e| format!("the connector could not start: {e}"))?;
                    streams = Some(deliveries);
                }
                Started::Plugin(Box::new(connector), synced)
            }
            Source::Documents(docs) => Started::Documents(docs),
        };

        // After the sync is open: the events an earlier runner saw end
        // roots whose stale children are then deleted.
        let resumed = earlier.map(|resumed| {
            tracing::info!(
                published = resumed.published.len(),
                events = resumed.events.len(),
                done = resumed.done,
                "resuming the connector where the run's last runner left it"
            );
            let skip = Arc::new(Skip::new(&resumed.published));
            if let Some(family) = accounting.family.get() {
                family.resumed(&skip);
            }
            accounting.resume(&resumed);
            RunStats::add(&self.stats.published, resumed.published.len() as u64);
            (resumed.done, skip)
        });

        let sync = match &source {
            Started::Plugin(_, Some(synced)) => Some(Arc::clone(&synced.sync)),
            _ => None,
        };
        let abort = Abort::default();
        if let Some(deliveries) = &streams {
            let (interrupt, abort) = (self.interrupt.clone(), abort.clone());
            deliveries.stop_when(move || interrupt.is_set() || abort.is_set());
            deliveries.follow(&self.pause);
        }
        let pipeline: Arc<str> = Arc::from(c.pipeline.as_str());
        let outcome = thread::scope(|scope| {
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
                resumed: resumed.as_ref().map(|(done, skip)| (*done, skip)),
                sync: sync.as_ref(),
                streaming: streams.is_some() || c.never_ends(),
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
            join_all(worker_threads, &abort, "a worker");
            join_all(indexer_threads, &abort, "an indexer");
            if let Some(events) = events {
                while let Ok(Polled::Item(event)) = events.poll_event(Duration::ZERO) {
                    accounting.apply(&event);
                }
            }
            outcome.and_then(|()| abort.reason().map_or(Ok(()), |r| Err(r.clone())))
        });
        // What is done is settled; the rest is left to its sources.
        if let Some(deliveries) = &streams {
            deliveries.close();
        }
        outcome
    }

    /// pre-execute, execute (while counting events), post-execute, close;
    /// documents read back are only published.
    fn connector_lifecycle(
        &self,
        run: &ConnectorRun<'_>,
        source: &mut Started,
    ) -> Result<(), StopReason> {
        let (connector, synced) = match source {
            Started::Plugin(connector, synced) => (connector, synced),
            Started::Documents(docs) => {
                let cancel = crate::plugin::Cancel::default();
                let docs = std::mem::take(docs);
                let run_id = run.run_id;
                let stop = cancel.clone();
                return self.execute_and_wait(run, &cancel, None, move |sink, timeout| {
                    replay::publish(docs, run_id, sink, timeout, &stop)
                });
            }
        };
        let ledger = synced.as_ref().map(|s| &*s.ledger);
        if let Some((true, _)) = run.resumed {
            // It had published its last document: only its events are waited for.
            let cancel = connector.canceller();
            let waited = self.execute_and_wait(run, &cancel, ledger, |_, _| Ok(()));
            let closed = connector
                .close()
                .map_err(|e| format!("close failed: {e}").into());
            // What the events seen here allow (the children kept per
            // parent, with the state): kept as a run that executed keeps it.
            let kept = ledger.map_or(Ok(()), |ledger| {
                ledger.commit().map_err(|e| {
                    format!("the connector's state could not be kept: {e} (the next run sends its documents again)").into()
                })
            });
            if let Some(family) = run.accounting.family.get() {
                family.report();
            }
            return waited.and(closed).and(kept);
        }
        let result = connector
            .pre_execute(run.run_id)
            .map_err(|e| StopReason::from(format!("pre-execute failed: {e}")))
            .and_then(|()| {
                let cancel = connector.canceller();
                let run_id = run.run_id;
                self.execute_and_wait(run, &cancel, ledger, |sink, timeout| {
                    connector
                        .execute(run_id, sink, timeout)
                        .map_err(|e| format!("execute failed: {e}"))
                })
            })
            .and_then(|()| {
                connector
                    .post_execute()
                    .map_err(|e| format!("post-execute failed: {e}").into())
            });
        let closed = connector
            .close()
            .map_err(|e| format!("close failed: {e}").into());
        // What is done is kept, however the run ends.
        let kept = ledger.map_or(Ok(()), |ledger| {
            let kept = ledger.commit().map_err(|e| {
                format!("the connector's state could not be kept: {e} (the next run sends its documents again)").into()
            });
            if ledger.committed() > 0 || ledger.uncommitted() > 0 {
                tracing::info!(
                    committed = ledger.committed(),
                    uncommitted = ledger.uncommitted(),
                    "connector state changes kept for the next run (uncommitted ones wait for documents not done)"
                );
            }
            kept
        });
        let kept_sync = synced.as_ref().map_or(Ok(()), |s| {
            // A complete run replaces a state set aside, even with no change.
            let settled = if result.is_ok() {
                s.ledger.settle_reset()
            } else {
                Ok(())
            };
            settled
                .and_then(|()| s.sync.commit(&s.ledger, result.is_ok()))
                .map_err(|e| {
                    format!(
                    "the sync's own state could not be kept: {e} (the next full sync sweeps again)"
                )
                .into()
                })
        });
        if let Some(family) = run.accounting.family.get() {
            family.report();
        }
        result.and(closed).and(kept).and(kept_sync)
    }

    /// Run `execute` on its own thread and count events until every published
    /// document is done, the connector fails, the run aborts, stalls or is
    /// interrupted, or time runs out; on all but the first, `cancel` stops
    /// `execute` and the run's plugin calls in flight are stopped.
    fn execute_and_wait(
        &self,
        run: &ConnectorRun<'_>,
        cancel: &crate::plugin::Cancel,
        ledger: Option<&Ledger>,
        execute: impl FnOnce(Box<dyn crate::plugin::PublishSink>, Duration) -> Result<(), String> + Send,
    ) -> Result<(), StopReason> {
        let ConnectorRun {
            config: c,
            run_id: _,
            publisher,
            accounting,
            abort,
            remote,
            resumed,
            sync,
            streaming,
        } = *run;
        // A continuous connector (a streaming one, or `continuous = true`)
        // runs until it is stopped: only an execute limit set for it cuts it.
        let (timeout, execute_timeout) =
            super::continuous::deadlines(c, &self.config.runner, streaming);
        let mut reports = super::continuous::Reports::of(c, &self.config.runner, streaming);
        tracing::debug!("connector executing");
        let scope = self.scope(&c.pipeline);
        let guard = super::guard::Guard::for_run(ledger, self.delete_share());
        self.stats.connector_started();
        let sink = || Publish {
            messenger: Arc::clone(publisher),
            accounting: Arc::clone(accounting),
            stats: Arc::clone(&self.stats),
            abort: abort.clone(),
            interrupt: self.interrupt.clone(),
            pause: self.pause.clone(),
            published: scope.published(&c.name),
            scope: scope.clone(),
            throttle: self.throttle.clone(),
            skip: resumed.map(|(_, skip)| Arc::clone(skip)),
            sync: sync.cloned(),
            guard: guard.clone(),
        };
        let mut held_sink = sink();
        let (execute_sink, mut sweep_sink) = (sink(), sink());
        let messenger = Arc::clone(publisher);
        let (run_id, interrupt) = (run.run_id, &self.interrupt);
        // The runner sleeps between looks at the events; the connector's
        // end wakes it.
        let runner = thread::current();
        thread::scope(|scope| {
            let stats = &self.stats;
            let mut execution = Some(spawn_in_span(scope, "weir-connector", move || {
                let _cpu = crate::telemetry::ThreadCpu::count_into(&stats.connector_cpu_nanos);
                let executed = held_sink.after_execute(
                    execute(Box::new(execute_sink), execute_timeout),
                    execute_timeout,
                );
                // Nothing more is coming but what the sweep or clean-ups
                // publish: the pipeline stops waiting to fill batches.
                messenger.drain();
                runner.unpark();
                executed
                    .and_then(|()| {
                        // A full sync's documents all done: its sweep.
                        sync.map_or(Ok(()), |sync| {
                            sync.sweep_after(
                                &mut sweep_sink,
                                accounting,
                                abort,
                                interrupt,
                                run_id,
                                ledger,
                            )
                        })
                    })
                    .and_then(|()| {
                        messenger.publishing_done().map_err(|e| {
                            format!(
                                "cannot confirm the connector's documents reached the pipeline: {e}"
                            )
                        })
                    })
            }));
            let mut executed: Option<Result<(), String>> = None;
            let mut watch = watch::Watch::new(&self.config.runner, &c.pipeline, &self.stats);
            let pending = self.scope(&c.pipeline).pending();
            let mut events = Vec::with_capacity(EVENT_CHUNK);
            let outcome = loop {
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
                if let Some(Err(e)) = accounting
                    .family
                    .get()
                    .map(|f| f.flush(&**publisher, accounting))
                {
                    abort.trigger(e);
                }
                if drained == 0 {
                    drained = watch::wait_for_events(&**publisher, accounting, executed.is_some())
                        .unwrap_or_else(|e| {
                            abort.trigger(format!("cannot read events: {e}"));
                            0
                        });
                }
                if drained > 0 {
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
                    break Err(reason.clone());
                }
                // Complete before an interrupt was seen: complete. A
                // continuous connector's `execute` ends when the interrupt
                // stops its sources, so one that ended with the interrupt
                // set was interrupted, however the two were seen here.
                if let Some(Ok(())) = &executed
                    && accounting.pending() == 0
                    && !watch.was_interrupted()
                    && !(streaming && self.interrupt.is_set())
                {
                    break Ok(());
                }
                if self.interrupt.is_set() {
                    // The connector stops; what is in flight gets the grace period.
                    if watch.interrupted(cancel, accounting.pending()) {
                        let pending = watch::pending_suffix(accounting);
                        break Err(StopReason::Interrupted { pending });
                    }
                    continue;
                }
                if let Some(Err(e)) = &executed {
                    break Err(e.clone().into());
                }
                if watch.started.elapsed() >= timeout {
                    let reason = format!(
                        "connector timeout of {timeout:?} reached{}",
                        watch::pending_suffix(accounting)
                    );
                    abort.trigger(reason.clone());
                    break Err(reason.into());
                }
                if let Some(reason) = watch.stalled(publisher.as_ref(), accounting) {
                    abort.trigger(reason.clone());
                    break Err(reason.into());
                }
                if let Some(Err(e)) = ledger.map(Ledger::commit_due) {
                    // Kept for the next try: the changes stay uncommitted.
                    tracing::warn!(error = %e, "the connector's state could not be committed yet");
                }
                let now_pending = accounting.pending();
                pending.set(now_pending as f64);
                watch.log_throughput(now_pending);
                if let Some(reports) = &mut reports {
                    reports.tick(accounting);
                }
            };
            if let Err(reason) = &outcome {
                // A run stopped by time (its connector timeout, a stall, the
                // end of its grace period) cuts the stage and indexer calls
                // in flight, their documents left pending: it ends on time.
                // A connector that failed by itself lets them finish, so the
                // summary counts exactly what was indexed.
                let by_time = abort.is_set() || reason.is_interrupted();
                // The reason first: a worker whose call is cut short sees
                // why, and leaves its document pending instead of failing
                // it. Then `execute` ends too, before the scope waits for it.
                abort.trigger(reason.clone());
                if by_time {
                    cancel.cancel();
                    abort.stop_calls();
                }
            }
            outcome
        })
    }
}
