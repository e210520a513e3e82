//! `weir fleet`: a fleet worker. It follows the specs the control plane
//! publishes and serves every active one's pipelines, each in a process of
//! its own (`weir fleet-pipeline`, killed with this one); a pipeline whose
//! process ends while its spec is active starts again after a backoff
//! (doubling from 2 s to 30 s with each quick death in a row, back to 2 s
//! once it has served for ten minutes). It
//! says what it serves on `<name>_workers`, for the status page.
//!
//! Identical workers on any number of machines share each pipeline's
//! partitions through Kafka's consumer groups: adding one adds capacity.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::Digest;

use super::pipeline::Job;
use super::{FleetConfig, PluginRef, Spec};
use crate::core::backoff::Backoff;
use crate::messenger::MessengerError;
use crate::messenger::kafka::table::Table;
use crate::tenancy::operator::OperatorConfig;
use crate::tenancy::process::{RunProcess, spawn_bounded};
use crate::tenancy::spec::{Served, WorkerStatus};

/// How often the worker says what it serves.
const STATUS_EVERY: Duration = Duration::from_secs(2);
/// The longest a pipeline's process that keeps ending waits to start again.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The first wait, and how long a process must serve for the next death
/// to wait the first again.
const FIRST_BACKOFF: Duration = Duration::from_secs(2);
const SERVED_WELL: Duration = Duration::from_secs(600);
/// How long a stopped pipeline's process may take to commit and end.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Why a fleet worker cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The operator's file has no `[fleet]` to serve.
    #[error("the operator's file has no [fleet]")]
    NoFleet,
    /// The fleet's topics cannot be used.
    #[error(transparent)]
    Kafka(#[from] MessengerError),
    /// What the worker serves cannot be written down.
    #[error("cannot write what this worker serves: {0}")]
    Status(#[from] serde_json::Error),
}

/// Why a spec's plugin cannot be had.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("plugin `{0}` is not a file name")]
    NotAFileName(String),
    #[error("plugin `{0}` has no SHA-256")]
    NoSha256(String),
    /// The fleet's token (its variable named) is not set.
    #[error("{0} is not set")]
    NoToken(String),
    /// No control plane gave it: the last one's answer.
    #[error("cannot fetch plugin `{file}`: {last}")]
    NotFetched { file: String, last: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Why one control plane did not give a plugin.
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error(transparent)]
    Http(#[from] ureq::Error),
    #[error("answered {0}")]
    Answered(ureq::http::StatusCode),
    #[error("its SHA-256 is {0}, not the spec's")]
    Digest(String),
}

/// One pipeline's process.
struct Running {
    tenant: String,
    pairs: usize,
    child: Option<Child>,
    restarts: u32,
    /// When it may start (again).
    next_start: Instant,
    /// When its process started, and how long to wait when it ends.
    started: Instant,
    backoff: Backoff,
}

/// A fleet worker.
#[allow(missing_debug_implementations)]
pub struct FleetWorker {
    operator: OperatorConfig,
    fleet: FleetConfig,
    process: RunProcess,
    id: String,
    token: Option<String>,
    specs: BTreeMap<String, Spec>,
    running: BTreeMap<(String, String), Running>,
    /// Specs whose plugins could not be had, with why (logged once).
    unserved: HashMap<String, String>,
}

impl FleetWorker {
    /// A worker for `operator`'s fleet, starting pipelines' processes as
    /// `process` says.
    pub fn new(operator: OperatorConfig, process: RunProcess) -> Result<Self, FleetError> {
        let fleet = operator.fleet.clone().ok_or(FleetError::NoFleet)?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "host".into());
        let token = std::env::var(&fleet.token_env).ok();
        if token.is_none() {
            tracing::warn!(
                variable = %fleet.token_env,
                "the fleet token is not set: plugins cannot be fetched"
            );
        }
        Ok(Self {
            operator,
            fleet,
            process,
            id: format!("{host}:{}", std::process::id()),
            token,
            specs: BTreeMap::new(),
            running: BTreeMap::new(),
            unserved: HashMap::new(),
        })
    }

    /// Serve until `stop` is set; then stop every pipeline's process.
    pub fn run(mut self, stop: &AtomicBool, ready: impl FnOnce()) -> Result<(), FleetError> {
        let specs = Table::open(&self.fleet.kafka, &self.fleet.pipelines_topic())?;
        let status = Table::open(&self.fleet.kafka, &self.fleet.workers_topic())?;
        let mut reader = specs.reader()?;
        for (key, value) in reader.to_end()? {
            self.change(key, value);
        }
        ready();
        tracing::info!(worker = %self.id, specs = self.specs.len(), "fleet worker serving");
        let mut last_status = Instant::now() - STATUS_EVERY;
        while !stop.load(Ordering::Relaxed) {
            if let Some((key, value)) = reader.next(Duration::from_millis(200)) {
                self.change(key, value);
            }
            self.reconcile();
            if last_status.elapsed() >= STATUS_EVERY {
                last_status = Instant::now();
                let text = serde_json::to_vec(&self.status())?;
                if let Err(e) = status.put(&self.id, Some(&text)) {
                    tracing::warn!(error = %e, "cannot say what this worker serves");
                }
            }
        }
        tracing::info!("stopping: every pipeline commits what it finished");
        let keys: Vec<_> = self.running.keys().cloned().collect();
        for key in keys {
            if let Some(running) = self.running.remove(&key) {
                stop_child(running.child, &key.1);
            }
        }
        let _ = status.put(&self.id, None);
        Ok(())
    }

    fn status(&self) -> WorkerStatus {
        WorkerStatus {
            worker: self.id.clone(),
            time_ms: crate::tenancy::now_ms(),
            pipelines: self
                .running
                .iter()
                .map(|((spec, pipeline), r)| Served {
                    spec: spec.clone(),
                    tenant: r.tenant.clone(),
                    pipeline: pipeline.clone(),
                    pairs: r.pairs,
                    pid: r.child.as_ref().map(Child::id),
                    restarts: r.restarts,
                })
                .collect(),
        }
    }

    /// A spec published, or retired (`None`).
    fn change(&mut self, key: String, value: Option<Vec<u8>>) {
        match value.map(|v| serde_json::from_slice::<Spec>(&v)) {
            Some(Ok(spec)) if spec.id == key => {
                self.specs.insert(key, spec);
            }
            Some(Ok(_) | Err(_)) => {
                tracing::warn!(spec = %key, "a published spec is not one; ignored");
            }
            None => {
                self.specs.remove(&key);
            }
        }
    }

    /// Start what active specs need, stop what retired ones had, and start
    /// again what ended.
    fn reconcile(&mut self) {
        let retired: Vec<_> = self
            .running
            .keys()
            .filter(|(spec, _)| !self.specs.contains_key(spec))
            .cloned()
            .collect();
        for key in retired {
            if let Some(running) = self.running.remove(&key) {
                tracing::info!(spec = %key.0, pipeline = %key.1, "spec retired: pipeline stopped");
                stop_child(running.child, &key.1);
            }
        }
        let specs: Vec<Spec> = self.specs.values().cloned().collect();
        for spec in specs {
            if self.unserved.contains_key(&spec.id) {
                continue;
            }
            for pipeline in &spec.pipelines {
                self.keep_serving(&spec, pipeline);
            }
        }
    }

    fn keep_serving(&mut self, spec: &Spec, pipeline: &str) {
        let key = (spec.id.clone(), pipeline.to_owned());
        if !self.running.contains_key(&key) {
            let cap = self
                .operator
                .tenant(&spec.tenant)
                .map_or(0, |t| t.fleet_pairs.unwrap_or(2 * self.fleet.pairs));
            let used: usize = self
                .running
                .values()
                .filter(|r| r.tenant == spec.tenant)
                .map(|r| r.pairs)
                .sum();
            let pairs = self.fleet.pairs.min(cap.saturating_sub(used));
            if pairs == 0 {
                if self
                    .unserved
                    .insert(spec.id.clone(), "tenant at its fleet_pairs".into())
                    .is_none()
                {
                    tracing::warn!(spec = %spec.id, tenant = %spec.tenant, pipeline, "the tenant has all the pairs it may have on this worker (fleet_pairs): not served here");
                }
                return;
            }
            self.running.insert(
                key.clone(),
                Running {
                    tenant: spec.tenant.clone(),
                    pairs,
                    child: None,
                    restarts: 0,
                    next_start: Instant::now(),
                    started: Instant::now(),
                    backoff: Backoff::new(FIRST_BACKOFF, MAX_BACKOFF, SERVED_WELL),
                },
            );
        }
        let Some(running) = self.running.get_mut(&key) else {
            return;
        };
        if let Some(child) = &mut running.child {
            match child.try_wait() {
                Ok(None) => return,
                Ok(Some(status)) => {
                    running.restarts += 1;
                    let backoff = running.backoff.after_death(running.started.elapsed());
                    tracing::warn!(spec = %spec.id, pipeline, %status, ?backoff, "the pipeline's process ended; starting it again");
                    running.child = None;
                    running.next_start = Instant::now() + backoff;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot tell whether a pipeline's process ended");
                    return;
                }
            }
        }
        if Instant::now() < running.next_start {
            return;
        }
        let pairs = running.pairs;
        let plugin_dir = match self.plugins_of(spec) {
            Ok(dir) => dir,
            Err(e) => {
                tracing::error!(spec = %spec.id, tenant = %spec.tenant, error = %e, "cannot have the spec's plugins: not served");
                self.unserved.insert(spec.id.clone(), e.to_string());
                self.running.remove(&key);
                return;
            }
        };
        let mut operator = self.operator.clone();
        operator.server.plugin_dir = plugin_dir;
        let job = Job {
            operator,
            tenant: spec.tenant.clone(),
            config: spec.config.clone(),
            pipeline: pipeline.to_owned(),
            kafka: self.fleet.kafka_for(spec),
            pairs,
        };
        let started = start_child(&self.process, &job);
        let Some(running) = self.running.get_mut(&key) else {
            return;
        };
        match started {
            Ok(child) => {
                tracing::info!(spec = %spec.id, tenant = %spec.tenant, pipeline, pairs, pid = child.id(), "serving");
                running.child = Some(child);
                running.started = Instant::now();
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot start a pipeline's process");
                running.next_start = Instant::now() + MAX_BACKOFF;
            }
        }
    }

    /// A directory holding `spec`'s plugins under their file names, each
    /// fetched (once) by its SHA-256 and verified.
    fn plugins_of(&self, spec: &Spec) -> Result<PathBuf, FetchError> {
        let work = absolute(&self.fleet.work_dir);
        let dir = work.join("specs").join(&spec.id);
        std::fs::create_dir_all(&dir)?;
        for plugin in &spec.plugins {
            if Path::new(&plugin.file).file_name() != Some(plugin.file.as_ref()) {
                return Err(FetchError::NotAFileName(plugin.file.clone()));
            }
            let cached = self.fetch(plugin, &work.join("plugins"))?;
            let target = dir.join(&plugin.file);
            if sha256_of(&target).ok().as_deref() != Some(plugin.sha256.as_str()) {
                let partial = dir.join(format!(".{}.{}", plugin.file, std::process::id()));
                std::fs::copy(&cached, &partial)?;
                std::fs::rename(&partial, &target)?;
            }
        }
        Ok(dir)
    }

    /// `plugin` in `cache`, fetched from a control plane unless there.
    fn fetch(&self, plugin: &PluginRef, cache: &Path) -> Result<PathBuf, FetchError> {
        if plugin.sha256.len() != 64 || !plugin.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(FetchError::NoSha256(plugin.file.clone()));
        }
        let path = cache.join(format!("{}.wasm", plugin.sha256));
        if sha256_of(&path).ok().as_deref() == Some(plugin.sha256.as_str()) {
            return Ok(path);
        }
        std::fs::create_dir_all(cache)?;
        let token = self
            .token
            .as_deref()
            .ok_or_else(|| FetchError::NoToken(self.fleet.token_env.clone()))?;
        let mut last = None;
        for base in &self.fleet.control {
            let url = format!(
                "{}/api/fleet/plugins/{}",
                base.trim_end_matches('/'),
                plugin.sha256
            );
            match fetch_verified(&url, token, &plugin.sha256) {
                Ok(bytes) => {
                    let partial = cache.join(format!(".{}.{}", plugin.sha256, std::process::id()));
                    std::fs::File::create(&partial)?.write_all(&bytes)?;
                    std::fs::rename(&partial, &path)?;
                    tracing::info!(plugin = %plugin.file, sha256 = %plugin.sha256, from = %base, "plugin fetched and verified");
                    return Ok(path);
                }
                Err(e) => last = Some(format!("{url}: {e}")),
            }
        }
        Err(FetchError::NotFetched {
            file: plugin.file.clone(),
            last: last.unwrap_or_default(),
        })
    }
}

/// The largest plugin a worker fetches.
const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// The body at `url`, if its SHA-256 is `sha256`.
fn fetch_verified(url: &str, token: &str, sha256: &str) -> Result<Vec<u8>, AskError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(120)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut answer = agent
        .get(url)
        .header("Authorization", &format!("Bearer {token}"))
        .call()?;
    if answer.status() != 200 {
        return Err(AskError::Answered(answer.status()));
    }
    let bytes = answer
        .body_mut()
        .with_config()
        .limit(MAX_PLUGIN_BYTES)
        .read_to_vec()?;
    let got = hex::encode(sha2::Sha256::digest(&bytes));
    if got != sha256 {
        return Err(AskError::Digest(got));
    }
    Ok(bytes)
}

fn sha256_of(path: &Path) -> std::io::Result<String> {
    Ok(hex::encode(sha2::Sha256::digest(std::fs::read(path)?)))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Start `job`'s process and send it the job.
fn start_child(process: &RunProcess, job: &Job) -> std::io::Result<Child> {
    let mut child = spawn_bounded(process, "fleet-pipeline", Some(libc::SIGKILL))?;
    if let Some(stderr) = child.stderr.take() {
        // Its log is this worker's log.
        std::thread::spawn(move || {
            let mut stderr = stderr;
            let _ = std::io::copy(&mut stderr, &mut std::io::stderr());
        });
    }
    let mut line = serde_json::to_string(job).map_err(std::io::Error::other)?;
    line.push('\n');
    if let Some(stdin) = &mut child.stdin {
        stdin.write_all(line.as_bytes())?;
    }
    Ok(child)
}

/// Stop a pipeline's process: its stdin closed, it commits and ends; killed
/// after [`STOP_GRACE`].
fn stop_child(child: Option<Child>, pipeline: &str) {
    let Some(mut child) = child else {
        return;
    };
    drop(child.stdin.take());
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    tracing::warn!(
        pipeline,
        "the pipeline's process did not stop in time: killed"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `weir fleet`: serve until `stop`.
pub fn serve_fleet(
    operator: OperatorConfig,
    process: RunProcess,
    stop: Arc<AtomicBool>,
    ready: impl FnOnce(),
) -> Result<(), FleetError> {
    FleetWorker::new(operator, process)?.run(&stop, ready)
}
