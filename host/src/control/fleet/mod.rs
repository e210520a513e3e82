//! The control plane's side of a fleet ([`crate::fleet`]): the specs it
//! publishes for its runs, the runs it keeps on Kafka for a standby, the
//! plugins fleet workers fetch by hash, and what the fleet serves.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

mod known;
pub(crate) mod letters;

use super::store::Store;
use super::{ApiError, StartError};
use crate::config::Config;
use crate::messenger::kafka::KafkaTopics;
use crate::messenger::kafka::table::Table;
use crate::tenancy::record::{RunRecord, now_ms};
use crate::tenancy::spec::{FleetConfig, PluginRef, Spec, WorkerStatus};
use known::Known;

pub use crate::tenancy::spec;

/// A run as kept on `<name>_runs`: its record and its config.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    record: RunRecord,
    config: String,
}

/// The fleet, as the control plane that leads sees it.
pub(super) struct Fleet {
    pub(super) config: FleetConfig,
    specs: Table,
    runs: Table,
    /// Tenants' schedules, as `control/schedules` keeps them.
    schedules: Table,
    workers: Table,
    known: Mutex<Known>,
    /// Specs retired (tombstoned), with when: their topics are deleted a
    /// little later, once the workers have stopped serving them.
    retiring: Mutex<Vec<(Instant, Spec)>>,
    token: Option<String>,
}

/// How long a retired spec's topics outlive its tombstone.
const TOPICS_OUTLIVE_SPEC: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

fn kafka_error(e: impl std::fmt::Display) -> StartError {
    StartError::Fleet(e.to_string())
}

impl Fleet {
    pub(super) fn open(config: FleetConfig) -> Result<Self, StartError> {
        let specs = Table::open(&config.kafka, &config.pipelines_topic()).map_err(kafka_error)?;
        let runs = Table::open(&config.kafka, &config.runs_topic()).map_err(kafka_error)?;
        let schedules =
            Table::open(&config.kafka, &config.schedules_topic()).map_err(kafka_error)?;
        let workers = Table::open(&config.kafka, &config.workers_topic()).map_err(kafka_error)?;
        let token = std::env::var(&config.token_env).ok();
        Ok(Self {
            config,
            specs,
            runs,
            schedules,
            workers,
            known: Mutex::default(),
            retiring: Mutex::default(),
            token,
        })
    }

    /// Take over from whichever control plane led before: every run it
    /// kept into `store`, and the specs it published. The runs that were
    /// going on are returned, with their configs, to be resumed.
    pub(super) fn take_over(&self, store: &Store) -> Result<Vec<(RunRecord, String)>, StartError> {
        let mut going = Vec::new();
        for (id, value) in self.runs.read_all().map_err(kafka_error)? {
            let Ok(kept) = serde_json::from_slice::<Kept>(&value) else {
                tracing::warn!(run_id = %id, "a kept run is not one; skipped");
                continue;
            };
            store.upsert(&kept.record, &kept.config)?;
            if kept.record.status.is_active() {
                going.push((kept.record, kept.config));
            }
        }
        let mut known = self.lock();
        // Idle from now: a run resumed below uses its spec again.
        let now = Instant::now();
        for (_, value) in self.specs.read_all().map_err(kafka_error)? {
            if let Ok(spec) = serde_json::from_slice::<Spec>(&value) {
                known.insert(spec, now);
            }
        }
        tracing::info!(
            runs_going_on = going.len(),
            specs = known.specs.len(),
            "took over the fleet's runs"
        );
        Ok(going)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The spec run `run` of `tenant`'s admitted `config` (`text` as
    /// submitted) runs on, published (with its pipelines' topics made)
    /// unless it was already; the run uses it until [`Fleet::release`].
    /// Under one lock: two runs of one config never publish two specs, and
    /// a spec is never retired between being found and being used.
    pub(super) fn spec_for(
        &self,
        run: &str,
        tenant: &str,
        text: &str,
        config: &Config,
    ) -> Result<Spec, ApiError> {
        let id = Spec::id_of(tenant, text);
        let mut known = self.lock();
        if let Some(spec) = known.specs.get(&id).cloned() {
            known.use_spec(run, &id);
            return Ok(spec);
        }
        let mut plugins: Vec<PluginRef> = Vec::new();
        for at in config.plugins() {
            let file = at
                .spec
                .path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .ok_or_else(|| ApiError::Internal("a plugin path has no file name".into()))?;
            let sha256 = at
                .spec
                .sha256
                .clone()
                .ok_or_else(|| ApiError::Internal(format!("plugin `{file}` was not hashed")))?;
            if !plugins.iter().any(|p| p.file == file) {
                plugins.push(PluginRef { file, sha256 });
            }
        }
        let spec = Spec {
            id: id.clone(),
            tenant: tenant.to_owned(),
            config: text.to_owned(),
            pipelines: config.pipelines.iter().map(|p| p.name.clone()).collect(),
            plugins,
            prefix: Spec::new_prefix(),
        };
        for pipeline in &spec.pipelines {
            KafkaTopics::new(self.config.kafka_for(&spec), pipeline)
                .ensure_pipeline_topics()
                .map_err(ApiError::internal)?;
        }
        let value = serde_json::to_vec(&spec).map_err(ApiError::internal)?;
        self.specs
            .put(&id, Some(&value))
            .map_err(ApiError::internal)?;
        tracing::info!(spec = %id, tenant, pipelines = ?spec.pipelines, "spec published to the fleet");
        known.insert(spec.clone(), Instant::now());
        known.use_spec(run, &id);
        Ok(spec)
    }

    /// Run `run` has ended (or never started): its spec may go idle.
    pub(super) fn release(&self, run: &str) {
        self.lock().release(run, Instant::now());
    }

    /// Retire the specs no run has used for `fleet.retire_after`: a
    /// tombstone on `<name>_pipelines` (fleet workers stop serving them),
    /// then, [`TOPICS_OUTLIVE_SPEC`] later, their pipelines' topics are
    /// deleted. A run's dead letters were copied to its files as they came.
    pub(super) fn retire_idle(&self) {
        let now = Instant::now();
        let due = self.lock().retire(now, self.config.retire_after);
        let mut retiring = self.retiring.lock().unwrap_or_else(PoisonError::into_inner);
        for spec in due {
            match self.specs.put(&spec.id, None) {
                Ok(()) => {
                    tracing::info!(spec = %spec.id, tenant = %spec.tenant, "spec retired: no run used it for fleet.retire_after");
                    retiring.push((now, spec));
                }
                Err(e) => {
                    tracing::warn!(spec = %spec.id, error = %e, "cannot retire a spec; trying again later");
                    self.lock().insert(spec, now);
                }
            }
        }
        let (gone, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut *retiring)
            .into_iter()
            .partition(|(at, _)| now.saturating_duration_since(*at) >= TOPICS_OUTLIVE_SPEC);
        *retiring = wait;
        drop(retiring);
        if gone.is_empty() {
            return;
        }
        // Deleting waits on the cluster (up to 30 s): not on the caller's
        // thread, which samples the runs' throughput.
        let topics: Vec<KafkaTopics> = gone
            .iter()
            .flat_map(|(_, spec)| {
                let kafka = self.config.kafka_for(spec);
                spec.pipelines
                    .iter()
                    .map(move |pipeline| KafkaTopics::new(kafka.clone(), pipeline))
            })
            .collect();
        let deleting = std::thread::Builder::new()
            .name("weir-retire-topics".into())
            .spawn(move || topics.iter().for_each(KafkaTopics::delete_pipeline_topics));
        if let Err(e) = deleting {
            tracing::warn!(error = %e, "cannot delete retired specs' topics");
        }
    }

    /// Keep `record` (with its `config`) where a standby reads it.
    pub(super) fn keep(&self, record: &RunRecord, config: &str) {
        let kept = Kept {
            record: record.clone(),
            config: config.to_owned(),
        };
        let result = serde_json::to_vec(&kept)
            .map_err(|e| e.to_string())
            .and_then(|v| {
                self.runs
                    .put(&record.id, Some(&v))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = result {
            tracing::error!(run_id = %record.id, error = %e, "cannot keep the run for a standby");
        }
    }

    /// Keep schedule `id` as `value` (JSON; `None`: deleted) where a
    /// standby reads it, and wait until the cluster has it.
    pub(super) fn keep_schedule(&self, id: &str, value: Option<&[u8]>) -> Result<(), String> {
        self.schedules.put(id, value).map_err(|e| e.to_string())
    }

    /// Every schedule kept (JSON), by id: what the last leader wrote.
    pub(super) fn kept_schedules(&self) -> Result<Vec<(String, Vec<u8>)>, StartError> {
        Ok(self
            .schedules
            .read_all()
            .map_err(kafka_error)?
            .into_iter()
            .collect())
    }

    /// Forget run `id` (pruned).
    pub(super) fn forget(&self, id: &str) {
        if let Err(e) = self.runs.put(id, None) {
            tracing::warn!(run_id = %id, error = %e, "cannot forget a pruned run on Kafka");
        }
    }

    /// Whether `token` is the fleet's.
    pub(super) fn is_fleet_token(&self, token: &str) -> bool {
        use sha2::Digest;
        // Compared as digests: the time taken says nothing about the token.
        self.token.as_deref().is_some_and(|known| {
            sha2::Sha256::digest(known.as_bytes()) == sha2::Sha256::digest(token.as_bytes())
        })
    }

    /// The plugin in `plugin_dir` whose SHA-256 is `sha256`, if a spec
    /// names it.
    pub(super) fn plugin(&self, plugin_dir: &Path, sha256: &str) -> Option<PathBuf> {
        let file = self
            .lock()
            .specs
            .values()
            .flat_map(|s| s.plugins.iter())
            .find(|p| p.sha256 == sha256)
            .map(|p| p.file.clone())?;
        let path = plugin_dir.join(file);
        let bytes = std::fs::read(&path).ok()?;
        use sha2::Digest;
        (hex::encode(sha2::Sha256::digest(bytes)) == sha256).then_some(path)
    }

    /// What each fleet worker said it serves last, with each pipeline's
    /// lag (its source records not yet committed by the fleet's workers).
    pub(super) fn workers(&self) -> Result<FleetView, ApiError> {
        let now = now_ms();
        let mut workers: Vec<WorkerView> = self
            .workers
            .read_all()
            .map_err(ApiError::internal)?
            .values()
            .filter_map(|v| serde_json::from_slice::<WorkerStatus>(v).ok())
            .map(|status| WorkerView {
                // A worker says what it serves every 2 s: one not heard
                // from for 10 s is gone (killed, or its machine lost).
                alive: now.saturating_sub(status.time_ms) < 10_000,
                status,
            })
            .collect();
        workers.sort_by(|a, b| a.status.worker.cmp(&b.status.worker));
        let specs: Vec<Spec> = self.lock().specs.values().cloned().collect();
        let mut pipelines = Vec::new();
        for spec in specs {
            for pipeline in &spec.pipelines {
                let topics = KafkaTopics::new(self.config.kafka_for(&spec), pipeline);
                pipelines.push(PipelineView {
                    spec: spec.id.clone(),
                    tenant: spec.tenant.clone(),
                    pipeline: pipeline.clone(),
                    lag: topics.worker_lag().ok(),
                });
            }
        }
        Ok(FleetView { workers, pipelines })
    }
}

/// `GET /api/fleet`.
#[derive(Debug, Serialize)]
pub struct FleetView {
    pub workers: Vec<WorkerView>,
    pub pipelines: Vec<PipelineView>,
}

#[derive(Debug, Serialize)]
pub struct PipelineView {
    pub spec: String,
    pub tenant: String,
    pub pipeline: String,
    /// Source records the fleet's workers have not committed yet.
    pub lag: Option<u64>,
}

/// A fleet worker as last heard from.
#[derive(Debug, Serialize)]
pub struct WorkerView {
    #[serde(flatten)]
    pub status: WorkerStatus,
    /// Heard from in the last 10 s.
    pub alive: bool,
}
