//! The runs going on in this process: their live counts and controls, the
//! throughput history sampled once a second, and the registry of them
//! (with the runs still starting, which count toward a tenant's quota).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::run::{Interrupt, Pause};
use crate::telemetry::RunStats;

use super::isolate::Remote;
use super::reload::LocalReload;
use crate::tenancy::process::protocol::ToRun;
use crate::tenancy::record::{Counts, RunRecord, RunState, now_ms};

/// Points of throughput history kept per run (one a second).
const SAMPLES: usize = 600;

/// A run going on in this process.
#[derive(Debug)]
pub(super) struct LiveRun {
    pub(super) id: String,
    pub(super) tenant: String,
    pub(super) submitted_ms: u64,
    pub(super) stats: Arc<RunStats>,
    pub(super) pause: Pause,
    pub(super) interrupt: Interrupt,
    /// The run's own process, when it runs in one: controls go there too.
    /// A continuous run's is replaced as it is started again.
    remote: Mutex<Option<Arc<Remote>>>,
    /// A continuous run's restarts (a run in a process of its own whose
    /// config never ends: `control/service.rs`).
    service: Option<super::restarts::Service>,
    /// Its runner, when it runs on this process's threads: to reload.
    pub(super) local: Option<LocalReload>,
    /// Set while a reload of it is under way: one at a time.
    pub(super) reloading: AtomicBool,
    stopping: AtomicBool,
    /// (milliseconds since the epoch, documents indexed) once a second.
    samples: Mutex<VecDeque<(u64, u64)>>,
}

impl LiveRun {
    pub(super) fn new(
        id: String,
        tenant: String,
        stats: Arc<RunStats>,
        pause: Pause,
        interrupt: Interrupt,
        remote: Option<Arc<Remote>>,
        local: Option<LocalReload>,
    ) -> Self {
        Self {
            id,
            tenant,
            submitted_ms: now_ms(),
            stats,
            pause,
            interrupt,
            remote: Mutex::new(remote),
            service: None,
            local,
            reloading: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            samples: Mutex::default(),
        }
    }

    /// A continuous run: started again when its process dies.
    pub(super) fn into_service(mut self) -> Self {
        self.service = Some(super::restarts::Service::default());
        self
    }

    pub(super) fn service(&self) -> Option<&super::restarts::Service> {
        self.service.as_ref()
    }

    /// A continuous run's restarts, for the API.
    pub(super) fn service_view(&self) -> Option<super::restarts::ServiceView> {
        self.service.as_ref().map(super::restarts::Service::view)
    }

    /// Its process now, when it runs in one.
    pub(super) fn remote(&self) -> Option<Arc<Remote>> {
        self.remote
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Its process started again.
    pub(super) fn set_remote(&self, remote: Arc<Remote>) {
        *self.remote.lock().unwrap_or_else(PoisonError::into_inner) = Some(remote);
    }

    /// Whether it was asked to stop.
    pub(super) fn stop_asked(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    pub(super) fn status(&self) -> RunState {
        if self.stopping.load(Ordering::Relaxed) {
            RunState::Stopping
        } else if self.service.as_ref().is_some_and(|s| s.restarting()) {
            RunState::Restarting
        } else if self.pause.is_paused() {
            RunState::Paused
        } else {
            RunState::Running
        }
    }

    /// Stop it as SIGINT stops `weir run`; a paused run is resumed first,
    /// or it would wait for its resume to notice.
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.pause.resume();
        self.interrupt.trigger();
        self.tell(&ToRun::Stop);
    }

    /// Pause it: connectors wait to publish, workers take nothing new.
    pub(super) fn pause(&self) {
        self.pause.pause();
        self.tell(&ToRun::Pause);
    }

    pub(super) fn resume(&self) {
        self.pause.resume();
        self.tell(&ToRun::Resume);
    }

    /// Its share of its tenant's rate, when it runs in its own process (in
    /// this one, its tenant's runs share one bucket).
    pub(super) fn set_rate(&self, per_second: u32) {
        self.tell(&ToRun::Rate { per_second });
    }

    fn tell(&self, message: &ToRun) {
        if let Some(remote) = self.remote() {
            remote.send(message);
        }
    }

    /// The run as the store keeps it, with its live status and counts.
    pub(super) fn record(&self) -> RunRecord {
        RunRecord {
            id: self.id.clone(),
            tenant: self.tenant.clone(),
            status: self.status(),
            submitted_ms: self.submitted_ms,
            finished_ms: None,
            counts: Counts::of(&self.stats),
            summary: None,
            error: None,
        }
    }

    pub(super) fn sample(&self) {
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() == SAMPLES {
            samples.pop_front();
        }
        samples.push_back((now_ms(), self.stats.snapshot().indexed));
    }

    /// Documents indexed per second between its samples.
    pub(super) fn throughput(&self) -> Vec<(u64, f64)> {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples
            .iter()
            .zip(samples.iter().skip(1))
            .map(|(a, b)| {
                let secs = (b.0.saturating_sub(a.0)) as f64 / 1000.0;
                (b.0, (b.1.saturating_sub(a.1)) as f64 / secs.max(0.001))
            })
            .collect()
    }
}

/// The runs going on, and those about to.
#[derive(Debug, Default)]
pub(super) struct Live {
    pub(super) runs: HashMap<String, Arc<LiveRun>>,
    /// Runs admitted or being validated, per tenant: they count toward the
    /// concurrency quota before they start.
    pub(super) starting: HashMap<String, usize>,
    pub(super) threads: Vec<std::thread::JoinHandle<()>>,
}

impl Live {
    /// Runs of `tenant` going on or starting.
    pub(super) fn going(&self, tenant: &str) -> usize {
        self.runs.values().filter(|r| r.tenant == tenant).count()
            + self.starting.get(tenant).copied().unwrap_or(0)
    }
}
