//! A continuous run as a service: a submitted config with a continuous
//! connector (`continuous = true`, or a streaming one) never ends by
//! itself, so when its process dies (killed, out of memory, a crash) it is
//! started again under the same run id, after a backoff that doubles with
//! each death in a row (1 s up to a minute) and starts over once it has
//! run well for ten minutes. Its connector's state carries it on from what
//! was done (documents in flight when it died are sent again: duplicates,
//! never losses); its counts go on from where they were.
//!
//! A stop through the API is not a death: the run stops and is recorded as
//! it ended. A stop while it waits to start again ends it at once. Pause,
//! resume and reload reach whichever process it has now; a paused run is
//! started again paused, and a reloaded one with its new config.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::isolate::{self, Remote};
use super::live::LiveRun;
use super::{ControlPlane, view};
use crate::core::backoff::Backoff;
use crate::tenancy::process::protocol::{Failure, ToRun};
use crate::tenancy::record::{Counts, RunRecord, RunState, now_ms};

/// The first wait before a start again, the longest, and how long a
/// process must run for the next death to wait the first again.
const FIRST: Duration = Duration::from_secs(1);
const MOST: Duration = Duration::from_secs(60);
const WELL_AFTER: Duration = Duration::from_secs(600);

/// How often a wait for a start again looks whether the run was stopped.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// How to start a continuous run's process (again).
pub(super) struct Restart {
    pub(super) plane: Arc<ControlPlane>,
    pub(super) process: isolate::RunProcess,
    /// The first start's message: a start again takes the run's config as
    /// it is kept now (reloaded or not).
    pub(super) start: ToRun,
    pub(super) grace: Duration,
}

/// Run `live` in `remote`, its process, and in new ones as each dies,
/// until it ends (stopped, or failed by itself): its record.
pub(super) fn serve(restart: &Restart, live: &LiveRun, mut remote: Arc<Remote>) -> RunRecord {
    let plane = &restart.plane;
    let mut backoff = Backoff::new(FIRST, MOST, WELL_AFTER);
    // The counts of its processes that died, which the next goes on from.
    let mut before = Counts::of(&live.stats);
    loop {
        let started = Instant::now();
        let outcome = remote.wait_over(&live.stats, before);
        plane.metrics.keep_totals(&remote.metrics());
        let why = match outcome {
            Ok(record) => {
                return RunRecord {
                    id: live.id.clone(),
                    tenant: live.tenant.clone(),
                    submitted_ms: live.submitted_ms,
                    counts: record.counts.plus(before),
                    ..record
                };
            }
            Err(why) => why,
        };
        // Stopped (its process killed past the stop's deadline), or the
        // server is going: a death, not one to come back from here.
        if live.stop_asked() || plane.shutting_down.load(Ordering::Relaxed) {
            return view::died(live, &why);
        }
        before = Counts::of(&live.stats);
        let mut ran = started.elapsed();
        remote = loop {
            let wait = backoff.after_death(ran);
            let restarts = live.service_view().map_or(0, |s| s.restarts) + 1;
            crate::telemetry::events::RunRestarting {
                run_id: &live.id,
                tenant: &live.tenant,
                exit: &why,
                restarts,
                backoff: wait,
            }
            .emit();
            if let Some(service) = live.service() {
                service.update(|s| {
                    s.restarts = restarts;
                    s.last_exit = Some(why.clone());
                    s.last_exit_ms = Some(now_ms());
                    s.next_start_ms =
                        Some(now_ms() + u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
                });
            }
            if !wait_unless_stopped(live, wait) || plane.shutting_down.load(Ordering::Relaxed) {
                return stopped_while_restarting(live, &why);
            }
            match start_again(restart, live) {
                Ok(remote) => break remote,
                Err(Failure::Refused(refusal)) => {
                    // Its config is refused now (the tenant's policy
                    // changed): it cannot come back.
                    return RunRecord {
                        status: RunState::Failure,
                        finished_ms: Some(now_ms()),
                        error: Some(format!(
                            "the run's process died ({why}) and its config is refused now: {}",
                            refusal.problems()
                        )),
                        ..live.record()
                    };
                }
                Err(Failure::Failed(e)) => {
                    tracing::warn!(run_id = %live.id, error = %e, "a continuous run's process did not start again");
                    ran = Duration::ZERO;
                }
            }
        };
        if let Some(service) = live.service() {
            service.update(|s| s.next_start_ms = None);
        }
        live.set_remote(Arc::clone(&remote));
        if live.pause.is_paused() {
            remote.send(&ToRun::Pause);
        }
        if let Some(tenant) = plane.operator.tenant(&live.tenant) {
            plane.rebalance(&tenant.name);
        }
    }
}

/// Start `live`'s process again, with its config as kept now.
fn start_again(restart: &Restart, live: &LiveRun) -> Result<Arc<Remote>, Failure> {
    let plane = &restart.plane;
    let mut start = restart.start.clone();
    if let ToRun::Start {
        config,
        per_second,
        fleet,
        ..
    } = &mut start
    {
        if let Ok(Some(kept)) = plane.store.config_of(&live.id) {
            *config = kept;
        }
        if let Some(tenant) = plane.operator.tenant(&live.tenant) {
            *per_second = plane.share(tenant, 0);
        }
        if let Some(fleet) = fleet {
            // Not resumed from its journal, which holds everything a run
            // that never ends has published: its connector goes on from its
            // committed state, and the events of what the dead process left
            // on the fleet's topics end as duplicates.
            fleet.resume = false;
        }
    }
    let group = plane.cpu_groups.get(&live.tenant);
    Remote::start(&restart.process, &start, restart.grace, group)
}

/// Wait `wait`, or until the run is asked to stop: false when it was.
fn wait_unless_stopped(live: &LiveRun, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        if live.stop_asked() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(STOP_CHECK));
    }
}

/// The record of `live`, stopped while it waited to start again.
fn stopped_while_restarting(live: &LiveRun, why: &str) -> RunRecord {
    tracing::info!(run_id = %live.id, "a continuous run was stopped while it waited to start again");
    RunRecord {
        status: RunState::Interrupted,
        finished_ms: Some(now_ms()),
        error: Some(format!(
            "stopped while its process waited to start again (the last one died: {why})"
        )),
        ..live.record()
    }
}
