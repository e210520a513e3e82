//! A run's life on the control plane, from its submission to its record:
//! a place in its tenant's quota while it starts (held by a guard, however
//! the start ends), admitted and started on a thread of this process or
//! in a process of its own, its thread that records how it ended even when
//! it panics, its share of its tenant's rate, and the finished runs the
//! operator does not keep removed. Under a fleet, each record is also kept
//! where a standby reads it, and the runs the last leader left going on
//! are taken over. A bug that takes one run down never leaves a tenant's
//! slot taken or a run `running` for good.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::isolate::{self, Isolation, Remote};
use super::live::LiveRun;
use super::reload::LocalReload;
use super::start::prepare;
use super::{ApiError, ControlPlane, Principal, RunView, view};
use crate::run::{Interrupt, Pause};
use crate::tenancy::admit;
use crate::tenancy::operator::TenantPolicy;
use crate::tenancy::process::protocol::{FleetRun, ToRun};
use crate::tenancy::record::{RunRecord, RunState, now_ms};

impl ControlPlane {
    /// Admit, validate and start the run `config` (TOML text) of `who`.
    pub fn submit(self: &Arc<Self>, who: &Principal, config: &str) -> Result<RunView, ApiError> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Err(ApiError::ShuttingDown);
        }
        let tenant = self.tenant(who)?;
        // Its place in the quota is given back once the run is live (when
        // it counts as going) or has failed to start, whichever way.
        let starting = self.reserve(tenant)?;
        let started = self.start(tenant, config);
        drop(starting);
        let (run, thread) = started?;
        let mut live = self.lock();
        live.threads.retain(|t| !t.is_finished());
        live.threads.push(thread);
        Ok(RunView {
            record: run.record(),
            throughput: Vec::new(),
            schedule: None,
            service: run.service_view(),
        })
    }

    fn start(
        self: &Arc<Self>,
        tenant: &TenantPolicy,
        text: &str,
    ) -> Result<(Arc<LiveRun>, std::thread::JoinHandle<()>), ApiError> {
        self.start_as(tenant, crate::run::new_run_id(), text, false)
    }

    /// Start run `id` of `tenant` (`text`), resuming it with `resume`.
    pub(super) fn start_as(
        self: &Arc<Self>,
        tenant: &TenantPolicy,
        id: String,
        text: &str,
        resume: bool,
    ) -> Result<(Arc<LiveRun>, std::thread::JoinHandle<()>), ApiError> {
        let started = self.start_run(tenant, id.clone(), text, resume);
        if started.is_err()
            && let Some(fleet) = &self.fleet
        {
            fleet.release(&id);
        }
        started
    }

    fn start_run(
        self: &Arc<Self>,
        tenant: &TenantPolicy,
        id: String,
        text: &str,
        resume: bool,
    ) -> Result<(Arc<LiveRun>, std::thread::JoinHandle<()>), ApiError> {
        let (run, body) = match &self.isolation {
            Isolation::Thread => self.start_here(tenant, &id, text)?,
            Isolation::Process(process) => self.start_remote(process, tenant, &id, text, resume)?,
        };
        if resume {
            self.store.set_status(&id, RunState::Running)?;
        } else {
            self.store.insert(&run.record(), text)?;
        }
        self.keep(&id);
        // Listed before its thread starts, which forgets it when it ends.
        self.lock().runs.insert(id.clone(), Arc::clone(&run));
        self.rebalance(&tenant.name);
        let plane = Arc::clone(self);
        let live = Arc::clone(&run);
        let thread = std::thread::Builder::new()
            .name(format!("weir-run-{id}"))
            .spawn(move || plane.supervise(&live, body))
            .map_err(|e| {
                // Never started: not live, and recorded as failed.
                self.lock().runs.remove(&id);
                let _ = self.store.finish(&RunRecord {
                    status: RunState::Failure,
                    finished_ms: Some(now_ms()),
                    error: Some(format!("cannot start the run's thread: {e}")),
                    ..run.record()
                });
                run.stop();
                ApiError::internal(e)
            })?;
        tracing::info!(run_id = %id, tenant = %tenant.name, "run submitted");
        Ok((run, thread))
    }

    /// Run `id` of `tenant` (`text`) on a thread of this process.
    fn start_here(
        &self,
        tenant: &TenantPolicy,
        id: &str,
        text: &str,
    ) -> Result<(Arc<LiveRun>, RunBody), ApiError> {
        let throttle = self.throttles.get(&tenant.name).cloned();
        let (runner, plugins) = prepare(&self.operator, tenant, id, text, throttle, None)?;
        let runner = Arc::new(runner);
        let run = Arc::new(LiveRun::new(
            id.to_owned(),
            tenant.name.clone(),
            runner.stats(),
            runner.pauser(),
            runner.interrupter(),
            None,
            Some(LocalReload(Arc::clone(&runner))),
        ));
        let body: RunBody = Box::new(move |live: &LiveRun| {
            let result = catch_unwind(AssertUnwindSafe(|| {
                runner.run_validated(&plugins, &live.id)
            }));
            view::ended(live, result)
        });
        Ok((run, body))
    }

    /// Run `id` of `tenant` (`text`) in a process of its own (on the
    /// fleet's topics, resumed from its journal with `resume`, when the
    /// operator has a fleet).
    fn start_remote(
        self: &Arc<Self>,
        process: &isolate::RunProcess,
        tenant: &TenantPolicy,
        id: &str,
        text: &str,
        resume: bool,
    ) -> Result<(Arc<LiveRun>, RunBody), ApiError> {
        // Refused here, without a process, when admission refuses it.
        let admitted = admit::admit(text, tenant, &self.operator, &self.run_dir(id).join("x"))
            .map_err(|refusal| ApiError::refused(refusal, &tenant.name))?;
        // A config that never ends is a service: started again when its
        // process dies (`service.rs`).
        let continuous = admitted.connectors.iter().any(|c| c.never_ends());
        let fleet = match &self.fleet {
            Some(fleet) => {
                let spec = fleet.spec_for(id, &tenant.name, text, &admitted)?;
                Some(Box::new(FleetRun {
                    kafka: fleet.config.kafka_for(&spec),
                    // A continuous run's journal grows with all it has
                    // published: a plane taking it over starts a fresh
                    // runner of it, which goes on from its committed state.
                    resume: resume && !continuous,
                }))
            }
            None => None,
        };
        let start = ToRun::Start {
            operator: Box::new(self.operator.clone()),
            tenant: tenant.name.clone(),
            run_id: id.to_owned(),
            config: text.to_owned(),
            per_second: self.share(tenant, 1),
            fleet,
        };
        let grace = admitted.runner.grace_period;
        let group = self.cpu_groups.get(&tenant.name);
        let remote = Remote::start(process, &start, grace, group)
            .map_err(|failure| ApiError::failed(failure, &tenant.name))?;
        let run = LiveRun::new(
            id.to_owned(),
            tenant.name.clone(),
            Arc::default(),
            Pause::default(),
            Interrupt::default(),
            Some(Arc::clone(&remote)),
            None,
        );
        let plane = Arc::clone(self);
        if continuous {
            let restart = super::service::Restart {
                plane,
                process: process.clone(),
                start,
                grace,
            };
            let body: RunBody =
                Box::new(move |live: &LiveRun| super::service::serve(&restart, live, remote));
            return Ok((Arc::new(run.into_service()), body));
        }
        let body: RunBody = Box::new(move |live: &LiveRun| {
            let record = match remote.wait(&live.stats) {
                Ok(record) => RunRecord {
                    id: live.id.clone(),
                    tenant: live.tenant.clone(),
                    submitted_ms: live.submitted_ms,
                    ..record
                },
                Err(why) => view::died(live, &why),
            };
            plane.metrics.keep_totals(&remote.metrics());
            record
        });
        Ok((Arc::new(run), body))
    }

    /// Remove the finished runs of `tenant` (every tenant's for `None`)
    /// the operator does not keep (`keep_runs`, `keep_runs_for`): their
    /// records, configs and dead letters.
    pub(super) fn prune(&self, tenant: Option<&str>) {
        let server = &self.operator.server;
        let before = server
            .keep_runs_for
            .map(|age| now_ms().saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX)));
        let removed = match self.store.prune(tenant, server.keep_runs, before) {
            Ok(removed) => removed,
            Err(e) => {
                tracing::error!(error = %e, "cannot remove the runs past keep_runs");
                return;
            }
        };
        for id in &removed {
            if let Some(fleet) = &self.fleet {
                fleet.forget(id);
            }
            match std::fs::remove_dir_all(self.run_dir(id)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(run_id = %id, error = %e, "cannot remove the run's files"),
            }
        }
        if !removed.is_empty() {
            tracing::info!(
                removed = removed.len(),
                tenant = tenant.unwrap_or("every tenant"),
                keep_runs = server.keep_runs,
                "finished runs removed (keep_runs, keep_runs_for)"
            );
        }
    }

    /// A place in `tenant`'s quota for a run about to start, or why not.
    pub(super) fn reserve<'a>(
        &'a self,
        tenant: &'a TenantPolicy,
    ) -> Result<Starting<'a>, ApiError> {
        let mut live = self.lock();
        let going = live.going(&tenant.name);
        if going >= tenant.max_concurrent_runs {
            return Err(ApiError::TooManyRuns {
                tenant: tenant.name.clone(),
                going,
                max: tenant.max_concurrent_runs,
            });
        }
        *live.starting.entry(tenant.name.clone()).or_default() += 1;
        Ok(Starting {
            plane: self,
            tenant: &tenant.name,
        })
    }

    /// Run `body` (the run itself, here or in its own process) on this
    /// thread, then record how it ended and forget it as live, even if
    /// recording fails; its tenant's other runs get the freed share of its
    /// rate.
    pub(super) fn supervise(&self, run: &LiveRun, body: RunBody) {
        // Forgotten as live last of all: only then does the API say the run
        // has ended, and what is not kept of its tenant's runs is gone.
        let _forget = Forget { plane: self, run };
        let record = body(run);
        if let Some(fleet) = &self.fleet {
            fleet.release(&run.id);
        }
        if self.fleet.is_some()
            && self
                .shutting_down
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            // Left to the next control plane, which resumes it.
            return;
        }
        if let Err(e) = self.store.finish(&record) {
            tracing::error!(run_id = %run.id, error = %e, "cannot record the run's end");
        }
        self.keep(&run.id);
        self.prune(Some(&run.tenant));
    }

    /// The share of `tenant`'s documents per second each of its runs gets
    /// with `more` runs besides those going on: a run in its own process
    /// cannot share the tenant's one bucket.
    pub(super) fn share(&self, tenant: &TenantPolicy, more: usize) -> Option<u32> {
        let rate = tenant.max_docs_per_second?;
        let runs = self
            .lock()
            .runs
            .values()
            .filter(|r| r.tenant == tenant.name)
            .count()
            + more;
        Some((rate / u32::try_from(runs.max(1)).unwrap_or(u32::MAX)).max(1))
    }

    /// Give each run of `tenant` in a process of its own its share again.
    pub(super) fn rebalance(&self, tenant: &str) {
        let Some(policy) = self.operator.tenant(tenant) else {
            return;
        };
        let Some(per_second) = self.share(policy, 0) else {
            return;
        };
        let runs: Vec<_> = self.lock().runs.values().cloned().collect();
        for run in runs.iter().filter(|r| r.tenant == tenant) {
            run.set_rate(per_second);
        }
    }

    /// Go on with a run another control plane started and left going on
    /// (it died): from its journal, under the same id.
    pub(super) fn take_over_run(self: &Arc<Self>, record: RunRecord, text: &str) {
        let Some(tenant) = self.operator.tenant(&record.tenant) else {
            tracing::error!(run_id = %record.id, tenant = %record.tenant, "a run of a tenant the operator's file no longer has: lost");
            return;
        };
        tracing::info!(run_id = %record.id, tenant = %record.tenant, "resuming a run the last control plane left going on");
        match self.start_as(tenant, record.id.clone(), text, true) {
            Ok((_, thread)) => self.lock().threads.push(thread),
            Err(e) => {
                tracing::error!(run_id = %record.id, error = %e, "cannot resume the run");
                let id = record.id.clone();
                let _ = self.store.finish(&RunRecord {
                    status: RunState::Failure,
                    finished_ms: Some(now_ms()),
                    error: Some(format!(
                        "the control plane that took the run over cannot resume it: {e}"
                    )),
                    ..record
                });
                self.keep(&id);
            }
        }
    }

    /// Keep run `id`'s record where a standby control plane reads it.
    pub(super) fn keep(&self, id: &str) {
        let Some(fleet) = &self.fleet else {
            return;
        };
        match (self.store.get(id), self.store.config_of(id)) {
            (Ok(Some(record)), Ok(Some(config))) => fleet.keep(&record, &config),
            _ => tracing::warn!(run_id = %id, "cannot read the run back to keep it"),
        }
    }
}

/// A run of `tenant` starting: it counts toward the tenant's
/// `max_concurrent_runs` until dropped, however the start ends.
pub(super) struct Starting<'a> {
    plane: &'a ControlPlane,
    tenant: &'a str,
}

/// A run's body: what runs it, to its record as it ended.
pub(super) type RunBody = Box<dyn FnOnce(&LiveRun) -> RunRecord + Send>;

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        let mut live = self.plane.lock();
        if let Some(n) = live.starting.get_mut(self.tenant) {
            *n = n.saturating_sub(1);
        }
    }
}

/// Forgets a run as live when dropped: at the end of its thread, panic or not.
struct Forget<'a> {
    plane: &'a ControlPlane,
    run: &'a LiveRun,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.plane.lock().runs.remove(&self.run.id);
        self.plane.rebalance(&self.run.tenant);
    }
}
