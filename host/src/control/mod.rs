//! The control plane behind `weir serve`: tenants submit runs over HTTP,
//! watch them live, pause, resume and stop them, and read their summaries
//! and dead letters; the operator's config says what each tenant may do.
//!
//! A submitted run is a local run, exactly as `weir run` makes it (the same
//! [`Runner`](crate::run::Runner), the same accounting), in a process of
//! its own ([`isolate`]; or on a thread of this one), after its config is
//! admitted ([`admit`], of the `tenancy` layer below) and its plugins
//! validated. Runs and their summaries are kept in a SQLite store
//! ([`store`]), so finished runs outlive a restart, up to the operator's
//! `keep_runs` per tenant.
//!
//! This file is the plane itself: its state, how it starts and stops, and
//! what is asked of it about runs (listing, reading, pausing, resuming,
//! stopping them, their dead letters, the fleet). The `impl ControlPlane`
//! is one per concern, each in its file: a run's life from submission to
//! record (`runs.rs`), reloading a live run (`reload.rs`), tapping one
//! (`taps.rs`), and a run's sync state (`state.rs`). [`routes`] puts it on
//! HTTP, the [`Principal`] extractor says who asks, and every refusal is
//! one [`ApiError`].

mod api;
mod auth;
mod body;
#[cfg(test)]
mod bounds_tests;
mod error;
pub mod fleet;
pub mod isolate;
mod letters;
mod live;
mod metrics;
mod push;
mod rate;
mod reload;
mod restarts;
mod run_process;
mod runs;
mod schedules;
mod service;
mod start;
mod state;
pub(crate) mod store;
mod taps;
#[cfg(test)]
mod tests;
mod view;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::run::Throttle;
use crate::tenancy::operator::{OperatorConfig, TenantPolicy};
use crate::tenancy::record::RunRecord;
use auth::Tokens;
use fleet::FleetView;
use isolate::Isolation;
use live::{Live, LiveRun};
use start::run_dir;
use store::{Cursor, Store, StoreError};

pub use crate::tenancy::{admit, operator};
pub use api::{routes, server_routes};
pub use auth::Principal;
pub use error::ApiError;
pub use letters::{LetterPage, Oversized};
pub use restarts::ServiceView;
pub use run_process::serve_run;
pub use schedules::{LastRun, RunSchedule, ScheduleView};
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
    /// What runs that ran in processes of their own counted.
    metrics: metrics::RunMetrics,
    /// The control group of each tenant with a `cpus` bound.
    cpu_groups: HashMap<String, isolate::TenantCpu>,
    limiter: rate::Limiter,
    shutting_down: AtomicBool,
    /// Where runs run when the operator has a `[fleet]`.
    fleet: Option<fleet::Fleet>,
    /// Taps open on runs, bounded per tenant and in all (`taps.rs`).
    taps: Arc<taps::TapCounts>,
    /// Tenants' schedules, started on time (`schedules/`).
    schedules: schedules::Schedules,
    /// Each tenant's allowance of pushed lines (`push.rs`).
    push_rates: push::PushRates,
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
            metrics: metrics::RunMetrics::default(),
            cpu_groups,
            limiter,
            shutting_down: AtomicBool::new(false),
            fleet,
            taps: Arc::default(),
            schedules: schedules::Schedules::default(),
            push_rates: push::PushRates::default(),
        });
        plane.load_schedules()?;
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
        schedules::spawn_clock(&plane).map_err(StartError::Sampler)?;
        Ok(plane)
    }

    fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
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
                schedule: self.schedule_of_run(&record.id),
                service: run.service_view(),
                record: run.record(),
                throughput: run.throughput(),
            },
            None => RunView {
                schedule: self.schedule_of_run(&record.id),
                service: None,
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
            .ok_or_else(|| ApiError::Ended(run.record.status.to_string()))
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

    /// What run `id`'s trace says of document `doc` (the run's own: a
    /// tenant reads only its runs'); none when the trace does not name it.
    pub fn trace(
        &self,
        who: &Principal,
        id: &str,
        doc: &str,
    ) -> Result<Option<crate::run::trace::RunHistory>, ApiError> {
        self.get(who, id)?;
        let path = start::trace_dir(&self.operator, id).join(format!("{id}.jsonl"));
        match crate::run::trace::history_in(&path, doc) {
            Ok(history) => Ok(history),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ApiError::NoState(
                "the run kept no trace: submit its config with `[trace] enabled = true`".into(),
            )),
            Err(e) => Err(ApiError::internal(e)),
        }
    }

    /// The metrics as `/metrics` shows them: this process's `own` and,
    /// for runs in processes of their own, theirs as last reported and the
    /// totals of those that ended (until idle for the metrics idle timeout).
    pub fn metrics_text(&self, own: &str) -> String {
        if matches!(self.isolation, Isolation::Thread) {
            return own.to_owned();
        }
        let remotes: Vec<_> = self
            .lock()
            .runs
            .values()
            .filter_map(|r| r.remote())
            .collect();
        let live = remotes.iter().map(|remote| remote.metrics());
        self.metrics
            .render(own, live, self.operator.server.metrics_idle_timeout)
    }

    /// What the fleet's workers serve, and each pipeline's lag: the
    /// operator's to see.
    pub fn fleet_view(&self, who: &Principal) -> Result<FleetView, ApiError> {
        if !matches!(who, Principal::Admin) {
            return Err(ApiError::OperatorOnly);
        }
        self.fleet
            .as_ref()
            .ok_or_else(|| ApiError::BadRequest("this server has no fleet".into()))?
            .workers()
    }

    /// The plugin a fleet worker asks for with `token`, by its SHA-256.
    pub fn fleet_plugin(&self, token: &str, sha256: &str) -> Option<PathBuf> {
        let fleet = self.fleet.as_ref().filter(|f| f.is_fleet_token(token))?;
        fleet.plugin(&self.operator.server.plugin_dir, sha256)
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
