//! What keeps a tenant's quota and its runs' records true however a run
//! ends: a place in the quota held by a guard while a run starts, and a
//! run's thread that records its end even when the run panics. A bug that
//! takes one run down never leaves a tenant's slot taken or a run `running`
//! for good.

use std::panic::{AssertUnwindSafe, catch_unwind};

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

    /// Run `body` (the run itself) on this thread, then record how it
    /// ended and forget it as live. A panic out of `body` is recorded as
    /// the run's failure, with the panic's message; the run is forgotten
    /// even if recording fails.
    pub(super) fn supervise(&self, run: &LiveRun, body: impl FnOnce() -> RunResult) {
        let _forget = Forget { plane: self, run };
        let record = match catch_unwind(AssertUnwindSafe(body)) {
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
        };
        if let Err(e) = self.store.finish(&record) {
            tracing::error!(run_id = %run.id, error = %e, "cannot record the run's end");
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
    }
}
