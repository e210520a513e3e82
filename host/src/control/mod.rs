//! The control plane behind `weir serve`: tenants submit runs over HTTP,
//! watch them live, pause, resume and stop them, and read their summaries
//! and dead letters; the operator's config says what each tenant may do.
//!
//! A submitted run is a local run, exactly as `weir run` makes it (the same
//! [`Runner`], the same accounting), on a thread of this process, after its
//! config is admitted ([`admit`]) and its plugins validated. Runs and their
//! summaries are kept in a SQLite store ([`store`]), so finished runs
//! outlive a restart.

pub mod admit;
mod api;
pub mod operator;
pub mod store;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::messenger::LocalMessengers;
use crate::run::{Interrupt, Pause, RunResult, Runner, Throttle};
use crate::telemetry::RunStats;
use admit::Refusal;
use operator::{OperatorConfig, TenantPolicy};
use store::{Counts, RunRecord, Store, now_ms};

pub use api::routes;

/// Points of throughput history kept per run (one a second).
const SAMPLES: usize = 600;

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Tenant(String),
    /// The operator: sees and controls every tenant's runs.
    Admin,
}

impl Principal {
    /// Whether it may see the runs of `tenant`.
    fn sees(&self, tenant: &str) -> bool {
        match self {
            Self::Admin => true,
            Self::Tenant(own) => own == tenant,
        }
    }
}

/// Why a request was not done: an HTTP status and what to tell the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// Each problem of a refused config, with its location where it has one.
    pub problems: Vec<String>,
}

impl ApiError {
    fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            problems: Vec::new(),
        }
    }

    fn not_found() -> Self {
        Self::new(404, "no such run")
    }

    fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(500, format!("{e}"))
    }
}

/// A run going on in this process.
#[derive(Debug)]
struct LiveRun {
    id: String,
    tenant: String,
    submitted_ms: u64,
    stats: Arc<RunStats>,
    pause: Pause,
    interrupt: Interrupt,
    stopping: AtomicBool,
    /// (milliseconds since the epoch, documents indexed) once a second.
    samples: Mutex<VecDeque<(u64, u64)>>,
}

impl LiveRun {
    fn status(&self) -> &'static str {
        if self.stopping.load(Ordering::Relaxed) {
            "stopping"
        } else if self.pause.is_paused() {
            "paused"
        } else {
            "running"
        }
    }

    fn counts(&self) -> Counts {
        let s = self.stats.snapshot();
        Counts {
            published: s.published,
            processed: s.processed,
            indexed: s.indexed,
            failed: s.failed,
            dropped: s.dropped,
        }
    }

    fn record(&self) -> RunRecord {
        RunRecord {
            id: self.id.clone(),
            tenant: self.tenant.clone(),
            status: self.status().into(),
            submitted_ms: self.submitted_ms,
            finished_ms: None,
            counts: self.counts(),
            summary: None,
            error: None,
        }
    }

    fn sample(&self) {
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() == SAMPLES {
            samples.pop_front();
        }
        samples.push_back((now_ms(), self.stats.snapshot().indexed));
    }
}

/// A run as the API shows it: the record, and for a live run its recent
/// throughput (documents indexed per second, one point a second).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunView {
    #[serde(flatten)]
    pub record: RunRecord,
    pub throughput: Vec<(u64, f64)>,
}

/// The control plane's state.
#[derive(Debug)]
pub struct ControlPlane {
    operator: OperatorConfig,
    store: Store,
    live: Mutex<Live>,
    /// Each tenant's documents-per-second quota, shared by its runs.
    throttles: HashMap<String, Arc<Throttle>>,
    /// SHA-256 of each token, and whose it is.
    tokens: Vec<([u8; 32], Principal)>,
    shutting_down: AtomicBool,
}

#[derive(Debug, Default)]
struct Live {
    runs: HashMap<String, Arc<LiveRun>>,
    /// Runs admitted or being validated, per tenant: they count toward the
    /// concurrency quota before they start.
    starting: HashMap<String, usize>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl ControlPlane {
    /// The control plane for `operator`: its store opened, each tenant's
    /// token read from the environment (a tenant whose variable is unset
    /// cannot sign in, and is warned about).
    pub fn new(operator: OperatorConfig) -> anyhow::Result<Arc<Self>> {
        let store = Store::open(&operator.server.data_dir)?;
        let mut tokens = Vec::new();
        let mut add = |var: &str, who: Principal| match std::env::var(var) {
            Ok(token) if !token.is_empty() => tokens.push((digest(&token), who)),
            _ => tracing::warn!(
                variable = var,
                "no token in the environment: {who:?} cannot sign in"
            ),
        };
        if let Some(var) = &operator.server.admin_token_env {
            add(var, Principal::Admin);
        }
        for t in &operator.tenants {
            add(&t.token_env, Principal::Tenant(t.name.clone()));
        }
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
            shutting_down: AtomicBool::new(false),
        });
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
                    drop(plane);
                    // Throughput is sampled on a clock, once a second.
                    std::thread::sleep(Duration::from_secs(1));
                }
            })?;
        Ok(plane)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whose `token` is, if anyone's.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        let digest = digest(token);
        self.tokens
            .iter()
            .find(|(d, _)| *d == digest)
            .map(|(_, who)| who.clone())
    }

    fn tenant(&self, who: &Principal) -> Result<&TenantPolicy, ApiError> {
        match who {
            Principal::Admin => Err(ApiError::new(
                403,
                "the operator's token does not submit runs: use a tenant's",
            )),
            Principal::Tenant(name) => self
                .operator
                .tenant(name)
                .ok_or_else(|| ApiError::new(403, "no such tenant")),
        }
    }

    fn run_dir(&self, id: &str) -> PathBuf {
        self.operator.server.data_dir.join("runs").join(id)
    }

    /// Admit, validate and start the run `config` (TOML text) of `who`.
    pub fn submit(self: &Arc<Self>, who: &Principal, config: &str) -> Result<RunView, ApiError> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Err(ApiError::new(503, "weir serve is shutting down"));
        }
        let tenant = self.tenant(who)?;
        {
            let mut live = self.lock();
            let going = live
                .runs
                .values()
                .filter(|r| r.tenant == tenant.name)
                .count()
                + live.starting.get(&tenant.name).copied().unwrap_or(0);
            if going >= tenant.max_concurrent_runs {
                return Err(ApiError::new(
                    429,
                    format!(
                        "tenant `{}` has {going} runs going on, its most at once (max_concurrent_runs = {})",
                        tenant.name, tenant.max_concurrent_runs
                    ),
                ));
            }
            *live.starting.entry(tenant.name.clone()).or_default() += 1;
        }
        let started = self.start(tenant, config);
        let mut live = self.lock();
        if let Some(n) = live.starting.get_mut(&tenant.name) {
            *n -= 1;
        }
        let (run, thread) = started?;
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
        let id = crate::run::new_run_id();
        let dead_letters = self.run_dir(&id).join("dead-letters.jsonl");
        let mut config =
            admit::admit(text, tenant, &self.operator, &dead_letters).map_err(|r| match r {
                Refusal::Invalid(problems) => ApiError {
                    status: 400,
                    message: "the config is not valid".into(),
                    problems: problems.iter().map(ToString::to_string).collect(),
                },
                Refusal::Forbidden(problems) => ApiError {
                    status: 403,
                    message: format!(
                        "the config asks for what tenant `{}` may not have",
                        tenant.name
                    ),
                    problems: problems.iter().map(ToString::to_string).collect(),
                },
            })?;
        config.runner.cache_dir = self.operator.server.cache_dir.clone();
        let runtime = crate::run::runtime_for(&config).map_err(ApiError::internal)?;
        let messengers = Arc::new(LocalMessengers {
            capacity: config.publisher.queue_capacity,
            max_bytes: config.publisher.queue_max_bytes(),
        });
        let mut runner = Runner::new(config, runtime, messengers);
        if let Some(throttle) = self.throttles.get(&tenant.name) {
            runner = runner.with_throttle(Arc::clone(throttle));
        }
        let plugins = runner.validate().map_err(|errors| ApiError {
            status: 400,
            message: "the config is not valid".into(),
            problems: errors.0.iter().map(ToString::to_string).collect(),
        })?;
        let run = Arc::new(LiveRun {
            id: id.clone(),
            tenant: tenant.name.clone(),
            submitted_ms: now_ms(),
            stats: runner.stats(),
            pause: runner.pauser(),
            interrupt: runner.interrupter(),
            stopping: AtomicBool::new(false),
            samples: Mutex::default(),
        });
        self.store
            .insert(&run.record(), text)
            .map_err(ApiError::internal)?;
        // Listed before its thread starts, which forgets it when it ends.
        self.lock().runs.insert(id.clone(), Arc::clone(&run));
        let plane = Arc::clone(self);
        let live = Arc::clone(&run);
        let thread = std::thread::Builder::new()
            .name(format!("weir-run-{id}"))
            .spawn(move || {
                let result = runner.run_validated(&plugins, &live.id);
                plane.finish(&live, &result);
            })
            .map_err(|e| {
                // Never started: not live, and recorded as failed.
                self.lock().runs.remove(&id);
                let _ = self.store.finish(&RunRecord {
                    status: "failure".into(),
                    finished_ms: Some(now_ms()),
                    error: Some(format!("cannot start the run's thread: {e}")),
                    ..run.record()
                });
                ApiError::internal(e)
            })?;
        tracing::info!(run_id = %id, tenant = %tenant.name, "run submitted");
        Ok((run, thread))
    }

    /// Record how `run` ended and forget it as live.
    fn finish(&self, run: &LiveRun, result: &RunResult) {
        let sum =
            |f: fn(&crate::run::ConnectorResult) -> u64| result.connectors.iter().map(f).sum();
        let record = RunRecord {
            status: result.status().name().into(),
            finished_ms: Some(now_ms()),
            counts: Counts {
                published: sum(|c| c.published),
                processed: run.stats.snapshot().processed,
                indexed: sum(|c| c.succeeded),
                failed: sum(|c| c.failed),
                dropped: sum(|c| c.dropped),
            },
            summary: Some(summary_json(result)),
            error: result.connectors.iter().find_map(|c| c.error.clone()),
            ..run.record()
        };
        if let Err(e) = self.store.finish(&record) {
            tracing::error!(run_id = %run.id, error = %e, "cannot record the run's end");
        }
        self.lock().runs.remove(&run.id);
    }

    /// The runs `who` may see, newest first, live ones with live counts.
    pub fn list(&self, who: &Principal, limit: usize) -> Result<Vec<RunView>, ApiError> {
        let tenant = match who {
            Principal::Admin => None,
            Principal::Tenant(t) => Some(t.as_str()),
        };
        let records = self.store.list(tenant, limit).map_err(ApiError::internal)?;
        Ok(records.into_iter().map(|r| self.view(r)).collect())
    }

    /// A stored record, with what is live about it if it is going on.
    fn view(&self, record: RunRecord) -> RunView {
        let live = self.lock().runs.get(&record.id).cloned();
        match live {
            Some(run) => RunView {
                record: run.record(),
                throughput: throughput(&run),
            },
            None => RunView {
                record,
                throughput: Vec::new(),
            },
        }
    }

    /// Run `id`, if `who` may see it.
    pub fn get(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        match self.store.get(id).map_err(ApiError::internal)? {
            Some(record) if who.sees(&record.tenant) => Ok(self.view(record)),
            _ => Err(ApiError::not_found()),
        }
    }

    fn live_run(&self, who: &Principal, id: &str) -> Result<Arc<LiveRun>, ApiError> {
        let run = self.get(who, id)?;
        self.lock()
            .runs
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::new(409, format!("the run has ended ({})", run.record.status)))
    }

    /// Pause run `id`: connectors wait to publish, workers take nothing new.
    pub fn pause(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        let run = self.live_run(who, id)?;
        run.pause.pause();
        self.set_status(&run);
        self.get(who, id)
    }

    pub fn resume(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        let run = self.live_run(who, id)?;
        run.pause.resume();
        self.set_status(&run);
        self.get(who, id)
    }

    /// Stop run `id` as SIGINT stops `weir run`: the connector is stopped,
    /// documents in flight get the grace period; it ends `interrupted`.
    pub fn stop(&self, who: &Principal, id: &str) -> Result<RunView, ApiError> {
        let run = self.live_run(who, id)?;
        run.stopping.store(true, Ordering::Relaxed);
        // A paused run would wait for its resume to notice.
        run.pause.resume();
        run.interrupt.trigger();
        self.set_status(&run);
        self.get(who, id)
    }

    fn set_status(&self, run: &LiveRun) {
        if let Err(e) = self.store.set_status(&run.id, run.status()) {
            tracing::warn!(run_id = %run.id, error = %e, "cannot record the run's status");
        }
    }

    /// The dead letters of run `id`, at most `limit`, oldest first.
    pub fn dead_letters(
        &self,
        who: &Principal,
        id: &str,
        limit: usize,
    ) -> Result<Vec<serde_json::Value>, ApiError> {
        self.get(who, id)?;
        let path = self.run_dir(id).join("dead-letters.jsonl");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ApiError::internal(e)),
        };
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .take(limit)
            .collect())
    }

    /// Stop every live run and wait for them to end (their ends recorded).
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        let threads = {
            let mut live = self.lock();
            for run in live.runs.values() {
                run.stopping.store(true, Ordering::Relaxed);
                run.pause.resume();
                run.interrupt.trigger();
            }
            std::mem::take(&mut live.threads)
        };
        for thread in threads {
            let _ = thread.join();
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Documents indexed per second between a live run's samples.
fn throughput(run: &LiveRun) -> Vec<(u64, f64)> {
    let samples = run.samples.lock().unwrap_or_else(PoisonError::into_inner);
    samples
        .iter()
        .zip(samples.iter().skip(1))
        .map(|(a, b)| {
            let secs = (b.0.saturating_sub(a.0)) as f64 / 1000.0;
            (b.0, (b.1.saturating_sub(a.1)) as f64 / secs.max(0.001))
        })
        .collect()
}

/// A run's summary as JSON: what `weir run` prints.
fn summary_json(result: &RunResult) -> serde_json::Value {
    let connectors: Vec<_> = result
        .connectors
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.name,
                "pipeline": c.pipeline,
                "published": c.published,
                "children": c.created,
                "succeeded": c.succeeded,
                "failed": c.failed,
                "dropped": c.dropped,
                "elapsed_ms": c.elapsed.as_millis() as u64,
                "error": c.error,
                "skipped": c.skipped,
            })
        })
        .collect();
    let stages: Vec<_> = result
        .stages
        .iter()
        .map(|s| {
            serde_json::json!({
                "pipeline": s.pipeline,
                "stage": s.stage,
                "documents": s.documents,
                "children": s.children,
                "failed": s.failed,
                "retries": s.retries,
                "time_ms": s.time.as_secs_f64() * 1000.0,
            })
        })
        .collect();
    serde_json::json!({
        "status": result.status().name(),
        "elapsed_ms": result.elapsed.as_millis() as u64,
        "connectors": connectors,
        "stages": stages,
    })
}
