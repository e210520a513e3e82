//! What keeps a tenant's quota and its runs' records true however a run
//! ends: a place in the quota held by a guard while a run starts, and a
//! run's thread that records its end even when the run panics. A bug that
//! takes one run down never leaves a tenant's slot taken or a run `running`
//! for good.

use super::live::LiveRun;
use super::operator::TenantPolicy;
use super::store::{RunRecord, now_ms};
use super::{ApiError, ControlPlane, view};
use crate::run::RunResult;

/// A run of `tenant` starting: it counts toward the tenant's
/// `max_concurrent_runs` until dropped, however the start ends.
pub(super) struct Starting<'a> {
    plane: &'a ControlPlane,
    tenant: &'a str,
}

impl ControlPlane {
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
}

/// A run's body: what runs it, to its record as it ended.
pub(super) type RunBody = Box<dyn FnOnce(&LiveRun) -> RunRecord + Send>;

/// The record of `run` once its runner returned `outcome`: how it ended,
/// or, for a panic, a failure with the panic's message.
pub(super) fn ended(run: &LiveRun, outcome: std::thread::Result<RunResult>) -> RunRecord {
    match outcome {
        Ok(result) => view::finished_record(run, &result),
        Err(panic) => {
            let why = crate::core::text::panic_text(&*panic);
            tracing::error!(run_id = %run.id, panic = %why, "the run stopped on a bug in Weir");
            RunRecord {
                status: "failure".into(),
                finished_ms: Some(now_ms()),
                error: Some(format!(
                    "the run stopped on a bug in Weir (please report it): {why}"
                )),
                ..run.record()
            }
        }
    }
}

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
