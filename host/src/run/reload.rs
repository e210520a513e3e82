//! Live reload: a changed config or stage plugin taken up by a running
//! process without a restart.
//!
//! [`Runner::reload`] validates the new config whole (every problem listed,
//! nothing applied when there is one), refuses changes a running process
//! cannot take (anything but pipelines' stages: connectors, indexers,
//! `[kafka]`, limits of the runner), and publishes the new stages as a
//! [`StageSet`] of the next generation. Each worker takes it up between two
//! batches: what it holds finishes on the old instances, the documents it
//! gathers next run on new ones. A worker hands its documents on in the
//! order it processed them, so per-id order holds across the switch, and no
//! document is left out: the switch happens where a worker has nothing in
//! hand.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{LoadedPlugins, Runner};
use crate::config::{Config, Problem, Problems};
use crate::telemetry::events::{ConfigReloaded, ReloadOutcome};

/// The stages workers run: a config, its plugins loaded, and what each
/// pipeline's stages are (a digest of their settings and components).
#[derive(Debug)]
pub(crate) struct StageSet {
    pub(crate) generation: u64,
    pub(crate) config: Arc<Config>,
    pub(crate) plugins: Arc<LoadedPlugins>,
    digests: HashMap<String, [u8; 32]>,
    /// The generation in which each pipeline's stages last changed.
    changed_at: HashMap<String, u64>,
    /// Workers that took it up.
    switched: AtomicUsize,
}

impl StageSet {
    /// Whether `pipeline`'s stages changed since `generation`.
    pub(crate) fn changed_since(&self, pipeline: &str, generation: u64) -> bool {
        self.changed_at
            .get(pipeline)
            .is_some_and(|&at| at > generation)
    }
}

/// What a reload came to (as `weir serve`'s API answers it, too).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Reloaded {
    /// Nothing the workers run changed.
    Unchanged,
    /// Generation `generation` was published; `pipelines` changed, and
    /// `switched` of the `workers` running them took it up within the wait.
    Applied {
        generation: u64,
        pipelines: Vec<String>,
        workers: usize,
        switched: usize,
    },
}

/// Why a reload was refused: the old config goes on. Either way the
/// refusal is its [`Problems`] (location and message), which the control
/// plane carries across the process and HTTP boundaries as they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadRefused {
    /// The new config is invalid: every problem.
    #[error("the new config is invalid; the old one goes on:\n{0}")]
    Invalid(Problems),
    /// The new config changes what a running process cannot take up: one
    /// problem per section changed, at its key (`worker`, `connectors`,
    /// `pipelines.books.indexer`, `pipelines` when they were added,
    /// removed or renamed).
    #[error(
        "the new config changes {}, which a running process cannot take up (only pipelines' stages reload): restart to apply it; the old config goes on",
        sections(.0)
    )]
    NeedsRestart(Problems),
}

impl ReloadRefused {
    /// Every problem of the refusal.
    pub fn problems(&self) -> &Problems {
        match self {
            Self::Invalid(problems) | Self::NeedsRestart(problems) => problems,
        }
    }
}

/// The sections a [`ReloadRefused::NeedsRestart`] names, as a list.
fn sections(problems: &Problems) -> String {
    problems
        .iter()
        .map(|p| p.location.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The generations of a runner's stages, shared with its workers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reloads(Arc<ReloadState>);

#[derive(Debug, Default)]
struct ReloadState {
    /// The newest generation published (0: none, the workers run the
    /// runner's own config).
    generation: AtomicU64,
    current: Mutex<Option<Arc<StageSet>>>,
    /// Workers running now, and a signal when one switches.
    workers: AtomicUsize,
    switching: Mutex<()>,
    switched: Condvar,
    /// One reload at a time.
    reloading: Mutex<()>,
    /// The stage digests of the plugins the run's workers started with
    /// (generation [`FIRST_GENERATION`]).
    started: Mutex<Option<HashMap<String, [u8; 32]>>>,
}

impl Reloads {
    /// The newest set, when it is newer than `generation`.
    pub(crate) fn newer(&self, generation: u64) -> Option<Arc<StageSet>> {
        if self.0.generation.load(Ordering::Acquire) <= generation {
            return None;
        }
        self.0
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A worker starts: it counts toward those a reload waits for while
    /// the returned guard lives.
    pub(crate) fn worker(&self) -> WorkerGuard {
        self.0.workers.fetch_add(1, Ordering::AcqRel);
        WorkerGuard(self.clone())
    }

    /// A worker took up `set`.
    pub(crate) fn switched(&self, set: &StageSet) {
        set.switched.fetch_add(1, Ordering::AcqRel);
        let _held = self
            .0
            .switching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.0.switched.notify_all();
    }

    /// Workers start on `plugins` (the first generation): a reload
    /// compares with what they run.
    pub(crate) fn starting(&self, plugins: &LoadedPlugins) {
        *self
            .0
            .started
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(plugins.digests.clone());
    }

    fn started(&self) -> Option<HashMap<String, [u8; 32]>> {
        self.0
            .started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The generation the runner's workers run now.
    pub(crate) fn generation(&self) -> u64 {
        self.current()
            .map_or(FIRST_GENERATION, |set| set.generation)
    }

    pub(crate) fn current(&self) -> Option<Arc<StageSet>> {
        self.0
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Wait up to `wait` for every running worker to take up `set`; how
    /// many had.
    fn await_switch(&self, set: &StageSet, wait: Duration) -> (usize, usize) {
        let deadline = Instant::now() + wait;
        let mut held = self
            .0
            .switching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            let workers = self.0.workers.load(Ordering::Acquire);
            let switched = set.switched.load(Ordering::Acquire);
            let left = deadline.saturating_duration_since(Instant::now());
            if switched >= workers
                || left.is_zero()
                || self.0.generation.load(Ordering::Acquire) != set.generation
            {
                return (workers, switched.min(workers));
            }
            held = self
                .0
                .switched
                .wait_timeout(held, left.min(Duration::from_millis(100)))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// A running worker, counted by [`Reloads`].
#[derive(Debug)]
pub(crate) struct WorkerGuard(Reloads);

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        self.0.0.workers.fetch_sub(1, Ordering::AcqRel);
        let _held = self
            .0
            .0
            .switching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.0.0.switched.notify_all();
    }
}

/// The generation of the stages a runner starts with.
pub(crate) const FIRST_GENERATION: u64 = 1;

/// How long a reload waits for the workers to switch before it reports
/// how many had: a worker switches after the batch in hand.
const SWITCH_WAIT: Duration = Duration::from_secs(30);

impl Runner {
    /// Take up `config`: validate it, refuse what cannot change while
    /// running, and hand the workers the new stages (see the module docs).
    pub fn reload(&self, config: Config) -> Result<Reloaded, ReloadRefused> {
        let _one = self
            .reloads
            .0
            .reloading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let result = self.reload_now(config);
        reported(&result);
        result
    }

    /// [`Runner::reload`] the config in `path` (loaded as at start).
    pub fn reload_file(&self, path: &std::path::Path) -> Result<Reloaded, ReloadRefused> {
        match Config::load(path) {
            Ok(config) => self.reload(config),
            Err(errors) => {
                let refused = Err(ReloadRefused::Invalid(errors));
                reported(&refused);
                refused
            }
        }
    }

    /// The files a reload reads: the config's stage plugins and their
    /// shadows', as the newest config says.
    pub fn stage_files(&self) -> Vec<std::path::PathBuf> {
        let current = self.reloads.current();
        let config = current.as_ref().map_or(&self.config, |set| &set.config);
        config
            .pipelines
            .iter()
            .flat_map(|p| &p.stages)
            .flat_map(|s| {
                std::iter::once(s.plugin.path.clone())
                    .chain(s.shadow.as_ref().map(|shadow| shadow.plugin.path.clone()))
            })
            .collect()
    }

    fn reload_now(&self, config: Config) -> Result<Reloaded, ReloadRefused> {
        let current = self.reloads.current();
        let old = current.as_ref().map_or(&self.config, |set| &set.config);
        let changed = needs_restart(old, &config);
        if !changed.is_empty() {
            return Err(ReloadRefused::NeedsRestart(changed));
        }
        let candidate = Runner::new(
            config.clone(),
            self.runtime.clone(),
            Arc::clone(&self.messengers),
        );
        let plugins = candidate.validate().map_err(ReloadRefused::Invalid)?;
        let digests = plugins.digests.clone();
        // What the workers run: the newest generation, or the plugins the
        // run started with (digested when they were loaded; never the
        // files as they are now, which may be the new ones already). No
        // worker started yet: every pipeline is taken as changed.
        let old_digests = match &current {
            Some(set) => set.digests.clone(),
            None => self.reloads.started().unwrap_or_default(),
        };
        let mut pipelines: Vec<String> = digests
            .iter()
            .filter(|(p, d)| old_digests.get(*p) != Some(d))
            .map(|(p, _)| p.clone())
            .collect();
        pipelines.sort();
        if pipelines.is_empty() {
            return Ok(Reloaded::Unchanged);
        }
        let generation = current
            .as_ref()
            .map_or(FIRST_GENERATION, |set| set.generation)
            + 1;
        let changed_at = digests
            .keys()
            .map(|p| {
                let at = if pipelines.contains(p) {
                    generation
                } else {
                    current
                        .as_ref()
                        .and_then(|set| set.changed_at.get(p).copied())
                        .unwrap_or(FIRST_GENERATION)
                };
                (p.clone(), at)
            })
            .collect();
        let set = Arc::new(StageSet {
            generation,
            changed_at,
            config: Arc::new(config),
            plugins: Arc::new(plugins),
            digests,
            switched: AtomicUsize::new(0),
        });
        *self
            .reloads
            .0
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&set));
        self.reloads
            .0
            .generation
            .store(generation, Ordering::Release);
        self.taps.know(super::tap_names(&set.config));
        if let Some(trace) = &*self.trace.lock().unwrap_or_else(PoisonError::into_inner) {
            let header = super::trace::Header::of(
                trace.run_id(),
                generation,
                &set.config,
                &set.plugins,
                trace.dead_letters(),
            );
            trace.header(&header);
        }
        let (workers, switched) = self.reloads.await_switch(&set, SWITCH_WAIT);
        Ok(Reloaded::Applied {
            generation,
            pipelines,
            workers,
            switched,
        })
    }
}

/// Tell what a reload came to (logged and counted as one event).
fn reported(result: &Result<Reloaded, ReloadRefused>) {
    let outcome = match result {
        Ok(Reloaded::Unchanged) => ReloadOutcome::Unchanged,
        Ok(Reloaded::Applied {
            generation,
            pipelines,
            workers,
            switched,
        }) => ReloadOutcome::Applied {
            generation: *generation,
            pipelines,
            workers: *workers,
            switched: *switched,
        },
        Err(refused) => ReloadOutcome::Refused(refused),
    };
    ConfigReloaded { outcome }.emit();
}

/// What differs between `old` and `new` beyond pipelines' stages: one
/// problem per section to name when refusing.
fn needs_restart(old: &Config, new: &Config) -> Problems {
    const WHY: &str = "changed: a running process cannot take this up (only pipelines' stages reload); restart to apply it";
    let mut changed = Problems::default();
    let names = |c: &Config| {
        c.pipelines
            .iter()
            .map(|p| p.name.clone())
            .collect::<Vec<_>>()
    };
    if names(old) != names(new) {
        changed.push(Problem::new(
            "pipelines",
            "added, removed or renamed: a running process cannot take this up (only pipelines' stages reload); restart to apply it",
        ));
    }
    for (o, n) in old.pipelines.iter().zip(&new.pipelines) {
        if o.indexer != n.indexer {
            changed.push(Problem::new(format!("pipelines.{}.indexer", n.name), WHY));
        }
    }
    type Same = fn(&Config, &Config) -> bool;
    let sections: [(&str, Same); 11] = [
        ("runner", |a, b| a.runner == b.runner),
        ("publisher", |a, b| a.publisher == b.publisher),
        ("worker", |a, b| a.worker == b.worker),
        ("connectors", |a, b| a.connectors == b.connectors),
        ("indexer", |a, b| a.indexer == b.indexer),
        ("dead_letters", |a, b| a.dead_letters == b.dead_letters),
        ("state", |a, b| a.state == b.state),
        ("kafka", |a, b| a.kafka == b.kafka),
        ("metrics", |a, b| a.metrics == b.metrics),
        ("tenants", |a, b| a.tenants == b.tenants),
        ("trace", |a, b| a.trace == b.trace),
    ];
    for (name, same) in sections {
        if !same(old, new) {
            changed.push(Problem::new(name, WHY));
        }
    }
    changed
}

/// Each pipeline's stages as a digest: their settings and the digest of
/// every component `plugins` loaded for them (stages and their shadows),
/// so a rebuilt plugin at the same path is a change. The components are
/// those loaded (the bytes they were compiled from), never the files as
/// they are now: the digests say what the workers of `plugins` run.
pub(super) fn stage_digests(config: &Config, plugins: &LoadedPlugins) -> HashMap<String, [u8; 32]> {
    let mut digests = HashMap::new();
    for pipeline in &config.pipelines {
        let loaded = plugins
            .pipelines
            .get(&pipeline.name)
            .map_or(&[][..], Vec::as_slice);
        let mut hash = Sha256::new();
        for stage in &pipeline.stages {
            hash.update(serde_json::to_vec(stage).unwrap_or_default());
            let component = loaded.iter().find(|p| p.name() == stage.name);
            hash.update(component.map_or([0; 32], |p| p.sha256()));
            let shadow = plugins
                .shadows
                .get(&(pipeline.name.clone(), stage.name.clone()));
            hash.update(shadow.map_or([0; 32], |s| s.plugin.sha256()));
        }
        digests.insert(pipeline.name.clone(), hash.finalize().into());
    }
    digests
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, std::path::Path::new("."), std::iter::empty()).expect("a config")
    }

    #[test]
    fn only_stage_changes_reload() {
        let base = r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = "c.wasm" }
            [[pipelines]]
            name = "p"
            [[pipelines.stages]]
            name = "s"
            plugin = { path = "s.wasm", config = { a = 1 } }
            [indexer]
            plugin = { path = "i.wasm" }
        "#;
        let old = config(base);
        let at = |changed: Problems| changed.into_iter().map(|p| p.location).collect::<Vec<_>>();
        assert!(needs_restart(&old, &config(&base.replace("a = 1", "a = 2"))).is_empty());
        let moved = config(&base.replace("name = \"c\"", "name = \"d\""));
        assert_eq!(at(needs_restart(&old, &moved)), ["connectors"]);
        let more = format!("{base}\n[worker]\nthreads = 7\n");
        assert_eq!(at(needs_restart(&old, &config(&more))), ["worker"]);
        let renamed = config(
            &base
                .replace("name = \"p\"", "name = \"q\"")
                .replace("pipeline = \"p\"", "pipeline = \"q\""),
        );
        let why = at(needs_restart(&old, &renamed));
        assert!(why.iter().any(|w| w.contains("pipelines")), "{why:?}");
        let refused = ReloadRefused::NeedsRestart(needs_restart(&old, &config(&more)));
        assert!(
            refused
                .to_string()
                .starts_with("the new config changes worker, which"),
            "{refused}"
        );
    }
}
