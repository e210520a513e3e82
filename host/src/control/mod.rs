//! The control plane behind `weir serve`: tenants submit runs over HTTP,
//! watch them live, pause, resume and stop them, and read their summaries
//! and dead letters; the operator's config says what each tenant may do.
//!
//! A submitted run is a local run, exactly as `weir run` makes it (the same
//! [`Runner`], the same accounting), in a process of its own ([`isolate`];
//! or on a thread of this one), after its
//! config is admitted ([`admit`]) and its plugins validated. Runs and their
//! summaries are kept in a SQLite store ([`store`]), so finished runs
//! outlive a restart, up to the operator's `keep_runs` per tenant.
//!
//! This file is the plane itself (submitting, listing and controlling
//! runs); [`routes`] puts it on HTTP, the [`Principal`] extractor says who
//! asks, and every refusal is one [`ApiError`].

pub mod admit;
#[cfg(test)]
mod admit_props;
mod api;
mod auth;
#[cfg(test)]
mod bounds_tests;
mod error;
pub mod fleet;
pub mod isolate;
mod letters;
mod live;
pub mod operator;
mod rate;
mod reload;
mod start;
mod state;
pub(crate) mod store;
mod supervise;
mod taps;
#[cfg(test)]
mod tests;
mod view;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::run::{Interrupt, Pause, Throttle};
use crate::telemetry::merge::{Merged, Take};
use auth::Tokens;
use isolate::Isolation;
use live::{Live, LiveRun};
use operator::{OperatorConfig, TenantPolicy};
use start::{prepare, run_dir};
use store::{Cursor, RunRecord, Store, StoreError, now_ms};
use supervise::RunBody;

pub use api::{routes, server_routes};
pub use auth::Principal;
pub use error::ApiError;
pub use letters::{LetterPage, Oversized};
pub use view::{RunPage, RunView};

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The throughput sampler's thread could not start.
    #[error(transparent)]
    Sampler(std::io::Error),
    /// A tenant's `cpus` cannot be held to: no control group could be made.
    #[error("tenants.{tenant}.cpus: cannot make its control group: {error}")]
    Cpus {
        tenant: String,
        error: std::io::Error,
    },
    /// The fleet's topics on Kafka could not be used.
    #[error("fleet: {0}")]
    Fleet(String),
}

/// The control plane's state.
#[derive(Debug)]
pub struct ControlPlane {
    operator: OperatorConfig,
    store: Store,
    live: Mutex<Live>,
    /// Each tenant's documents-per-second quota, shared by its runs.
    throttles: HashMap<String, Arc<Throttle>>,
    tokens: Tokens,
    /// Where runs run: on threads of this process, or each in its own.
    isolation: Isolation,
    /// What runs that ran in processes of their own counted, summed.
    finished_metrics: Mutex<Merged>,
    /// The control group of each tenant with a `cpus` bound.
    cpu_groups: HashMap<String, isolate::TenantCpu>,
    limiter: rate::Limiter,
    shutting_down: AtomicBool,
    /// Where runs run when the operator has a `[fleet]`.
    fleet: Option<fleet::Fleet>,
    /// Taps open on runs, bounded per tenant and in all (`taps.rs`).
    taps: Arc<taps::TapCounts>,
}

impl ControlPlane {
    /// The control plane for `operator`: its store opened, each tenant's
    /// token read from the environment (a tenant whose variable is unset
    /// cannot sign in, and is warned about).
    /// Runs run as `isolation` says.
    pub fn new(operator: OperatorConfig, isolation: Isolation) -> Result<Arc<Self>, StartError> {
        Self::with_tokens(operator, isolation, |var| std::env::var(var).ok())
    }

    /// As [`new`](Self::new), with each token variable read by `var`.
    fn with_tokens(
        operator: OperatorConfig,
        isolation: Isolation,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Arc<Self>, StartError> {
        let store = Store::open(&operator.server.data_dir)?;
        let fleet = operator.fleet.clone().map(fleet::Fleet::open).transpose()?;
        let going = match &fleet {
            Some(fleet) => fleet.take_over(&store)?,
            None => Vec::new(),
        };
        let tokens = Tokens::read(&operator, var);
        let mut cpu_groups = HashMap::new();
        for tenant in &operator.tenants {
            if let (Some(cpus), Isolation::Process(_)) = (tenant.cpus, &isolation) {
                let group = isolate::TenantCpu::new(&tenant.name, cpus).map_err(|error| {
                    StartError::Cpus {
                        tenant: tenant.name.clone(),
                        error,
                    }
                })?;
                cpu_groups.insert(tenant.name.clone(), group);
            }
        }
        let limiter = rate::Limiter::new(rate::Rate::new(
            f64::from(operator.server.requests_per_second),
            f64::from(operator.server.request_burst),
        ));
        let throttles = operator
            .tenants
            .iter()
            .filter_map(|t| {
                t.max_docs_per_second
                    .map(|rate| (t.name.clone(), Arc::new(Throttle::new(rate))))
            })
            .collect();
        let plane = Arc::new(Self {
            operator,
            store,
            live: Mutex::default(),
            throttles,
            tokens,
            isolation,
            finished_metrics: Mutex::default(),
            cpu_groups,
            limiter,
            shutting_down: AtomicBool::new(false),
            fleet,
            taps: Arc::default(),
        });
        for (record, config) in going {
            plane.take_over_run(record, &config);
        }
        // What the operator keeps may have changed since the last start.
        plane.prune(None);
        let weak = Arc::downgrade(&plane);
        std::thread::Builder::new()
            .name("weir-sampler".into())
            .spawn(move || {
                while let Some(plane) = weak.upgrade() {
                    if plane.shutting_down.load(Ordering::Relaxed) {
                        return;
                    }
                    for run in plane.lock().runs.values() {
                        run.sample();
                    }
                    if let Some(fleet) = &plane.fleet {
                        fleet.retire_idle();
                    }
                    drop(plane);
                    // Throughput is sampled on a clock, once a second.
                    std::thread::sleep(Duration::from_secs(1));
                }
            })
            .map_err(StartError::Sampler)?;
        Ok(plane)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whose `token` is, if anyone's.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        self.tokens.owner(token)
    }

    fn tenant(&self, who: &Principal) -> Result<&TenantPolicy, ApiError> {
        match who {
            Principal::Admin => Err(ApiError::OperatorSubmits),
            Principal::Tenant(name) => self.operator.tenant(name).ok_or(ApiError::NoSuchTenant),
        }
    }

    fn run_dir(&self, id: &str) -> PathBuf {
        run_dir(&self.operator, id)
    }

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
    fn start_as(
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
            Isolation::Thread => {
                let throttle = self.throttles.get(&tenant.name).cloned();
                let (runner, plugins) = prepare(&self.operator, tenant, &id, text, throttle, None)?;
                let runner = Arc::new(runner);
                let run = Arc::new(LiveRun::new(
                    id.clone(),
                    tenant.name.clone(),
                    runner.stats(),
                    runner.pauser(),
                    runner.interrupter(),
                    None,
                    Some(reload::LocalReload(Arc::clone(&runner))),
                ));
                let body: RunBody = Box::new(move |live: &LiveRun| {
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        runner.run_validated(&plugins, &live.id)
                    }));
                    supervise::ended(live, result)
                });
                (run, body)
            }
            Isolation::Process(process) => {
                // Refused here, without a process, when admission refuses it.
                let admitted =
                    admit::admit(text, tenant, &self.operator, &self.run_dir(&id).join("x"))
                        .map_err(|refusal| ApiError::refused(refusal, &tenant.name))?;
                let fleet = match &self.fleet {
                    Some(fleet) => {
                        let spec = fleet.spec_for(&id, &tenant.name, text, &admitted)?;
                        Some(Box::new(isolate::FleetRun {
                            kafka: fleet.config.kafka_for(&spec),
                            resume,
                        }))
                    }
                    None => None,
                };
                let start = isolate::ToRun::Start {
                    operator: Box::new(self.operator.clone()),
                    tenant: tenant.name.clone(),
                    run_id: id.clone(),
                    config: text.to_owned(),
                    per_second: self.share(tenant, 1),
                    fleet,
                };
                let grace = admitted.runner.grace_period;
                let group = self.cpu_groups.get(&tenant.name);
                let remote = isolate::Remote::start(process, &start, &tenant.name, grace, group)?;
                let run = Arc::new(LiveRun::new(
                    id.clone(),
                    tenant.name.clone(),
                    Arc::default(),
                    Pause::default(),
                    Interrupt::default(),
                    Some(Arc::clone(&remote)),
                    None,
                ));
                let plane = Arc::clone(self);
                let body: RunBody = Box::new(move |live: &LiveRun| {
                    let record = remote.wait(live);
                    plane.keep_totals(&remote.metrics());
                    record
                });
                (run, body)
            }
        };
        if resume {
            self.store.set_status(&id, "running")?;
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
                    status: "failure".into(),
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

    /// Remove the finished runs of `tenant` (every tenant's for `None`)
    /// the operator does not keep (`keep_runs`, `keep_runs_for`): their
    /// records, configs and dead letters.
    fn prune(&self, tenant: Option<&str>) {
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

    /// A page of the runs `who` may see, newest first, from just after
    /// `after`; live ones with live counts.
    pub fn list(
        &self,
        who: &Principal,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<RunPage, ApiError> {
        let tenant = match who {
            Principal::Admin => None,
            Principal::Tenant(t) => Some(t.as_str()),
        };
        let (records, next) = self.store.page(tenant, after, limit)?;
        Ok(RunPage {
            runs: records.into_iter().map(|r| self.view(r)).collect(),
            next: next.map(|c| c.to_string()),
        })
    }

    /// A stored record, with what is live about it if it is going on.
    fn view(&self, record: RunRecord) -> RunView {
        let live = self.lock().runs.get(&record.id).cloned();
        match live {
            Some(run) => RunView {
                record: run.record(),
                throughput: run.throughput(),
            },
            None => RunView {
                record,
                throughput: Vec::new(),
            },
        }
    }

    /// Run `id`, if `who` may see it.
    pub fn get(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        match self.store.get(id)? {
            Some(record) if who.sees(&record.tenant) => Ok(self.view(record)),
            _ => Err(ApiError::NoSuchRun),
        }
    }

    fn live_run(&self, who: &Principal, id: &str) -> Result<Arc<LiveRun>, ApiError> {
        let run = self.get(who, id)?;
        self.lock()
            .runs
            .get(id)
            .cloned()
            .ok_or(ApiError::Ended(run.record.status))
    }

    /// Pause run `id`: connectors wait to publish, workers take nothing new.
    pub fn pause(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        let run = self.live_run(who, id)?;
        run.pause();
        self.set_status(&run);
        self.get(who, id)
    }

    pub fn resume(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        let run = self.live_run(who, id)?;
        run.resume();
        self.set_status(&run);
        self.get(who, id)
    }

    /// Stop run `id` as SIGINT stops `weir run`: the connector is stopped,
    /// documents in flight get the grace period; it ends `interrupted`.
    pub fn stop(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        let run = self.live_run(who, id)?;
        run.stop();
        self.set_status(&run);
        self.get(who, id)
    }

    fn set_status(&self, run: &LiveRun) {
        if let Err(e) = self.store.set_status(&run.id, run.status()) {
            tracing::warn!(run_id = %run.id, error = %e, "cannot record the run's status");
        }
        self.keep(&run.id);
    }

    /// A page of the dead letters of run `id`, oldest first: from byte
    /// `offset` of its file (0, or a page's `next_offset`), at most
    /// `limit` of them.
    pub fn dead_letters(
        &self,
        who: &Principal,
        id: &str,
        offset: u64,
        limit: usize,
    ) -> Result<LetterPage, ApiError> {
        self.get(who, id)?;
        let path = self.run_dir(id).join("dead-letters.jsonl");
        letters::read_page(&path, offset, limit, letters::PAGE_BYTES).map_err(|e| match e {
            letters::PageError::Offset(_) => ApiError::BadRequest(e.to_string()),
            letters::PageError::Io(e) => ApiError::internal(e),
        })
    }

    /// Add what a run that ran in its own process counted, as it ended.
    fn keep_totals(&self, text: &str) {
        let mut kept = self
            .finished_metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        kept.add(text, Take::Totals);
    }

    /// The metrics as `/metrics` shows them: this process's `own` and,
    /// for runs in processes of their own, theirs as last reported and the
    /// totals of those that ended (until idle for the metrics idle timeout).
    pub fn metrics_text(&self, own: &str) -> String {
        if matches!(self.isolation, Isolation::Thread) {
            return own.to_owned();
        }
        let mut now = Merged::default();
        now.add(own, Take::Everything);
        let remotes: Vec<_> = self
            .lock()
            .runs
            .values()
            .filter_map(|r| r.remote.clone())
            .collect();
        for remote in remotes {
            now.add(&remote.metrics(), Take::Everything);
        }
        let mut kept = self
            .finished_metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        kept.expire(self.operator.server.metrics_idle_timeout);
        kept.with(&now).render()
    }

    /// Stop every live run and wait for them to end (their ends recorded).
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        if self.fleet.is_some() {
            // The fleet's runs go on: the control plane that leads next
            // resumes them. This one's run processes end with it.
            tracing::info!("the fleet's runs are left to the next control plane");
            return;
        }
        let threads = {
            let mut live = self.lock();
            for run in live.runs.values() {
                run.stop();
            }
            std::mem::take(&mut live.threads)
        };
        for thread in threads {
            let _ = thread.join();
        }
    }
}
