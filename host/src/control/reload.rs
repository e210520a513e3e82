//! Reloading a live run of `weir serve`: with a tenant's new config
//! (`PUT /api/runs/{id}/config`), or with its own config again, on SIGHUP
//! and with `--watch`, so that a plugin changed on disk is taken up. A new
//! config is admitted as a submitted one is, then handed to the run's
//! [`Runner::reload`]: only pipelines' stages change while a run goes on.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{ApiError, ControlPlane, Principal};
use crate::run::{Reloaded, Runner};
use crate::tenancy::operator::{OperatorConfig, TenantPolicy};

/// Admit `text` for run `id` of `tenant` as a submitted config is, and
/// reload `runner` with it; the old stages go on when it is refused.
pub(super) fn reload(
    runner: &Runner,
    operator: &OperatorConfig,
    tenant: &TenantPolicy,
    id: &str,
    text: &str,
) -> Result<Reloaded, ApiError> {
    match runner.reload(super::start::admitted(operator, tenant, id, text)?) {
        Ok(reloaded) => Ok(reloaded),
        Err(refused) => Err(ApiError::refused(refused, &tenant.name)),
    }
}

/// A run of this process's threads, reloadable: its runner, shared with
/// the thread that runs it.
#[derive(Clone)]
pub(super) struct LocalReload(pub(super) Arc<Runner>);

impl std::fmt::Debug for LocalReload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalReload")
    }
}

/// Plugin files `weir serve --watch` looks at, at most.
const WATCHED_PLUGINS: usize = 10_000;

/// Clears its flag when dropped, however its holder ends.
struct Cleared<'a>(&'a AtomicBool);

impl Drop for Cleared<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl ControlPlane {
    /// Reload run `id` of `who` with `text` (its new config), or with its
    /// own config again for `None` (so that its changed plugins are taken
    /// up): admitted as a submitted config is; only pipelines' stages may
    /// change. A new config that is taken up is kept as the run's.
    pub fn reload(
        &self,
        who: &Principal,
        id: &str,
        text: Option<&str>,
    ) -> Result<Reloaded, ApiError> {
        let run = self.live_run(who, id)?;
        if self.fleet.is_some() {
            return Err(ApiError::BadRequest(
                "a fleet's runs are processed by its workers: they reload on SIGHUP or with --watch".into(),
            ));
        }
        let tenant = self
            .operator
            .tenant(&run.tenant)
            .ok_or(ApiError::NoSuchTenant)?;
        let kept;
        let text = match text {
            Some(text) => text,
            None => {
                kept = self.store.config_of(id)?.ok_or(ApiError::NoSuchRun)?;
                &kept
            }
        };
        // One reload of a run at a time: each loads and checks plugins.
        if run.reloading.swap(true, Ordering::AcqRel) {
            return Err(ApiError::Reloading);
        }
        let _done = Cleared(&run.reloading);
        let outcome = match (&run.local, &run.remote()) {
            (Some(local), _) => reload(&local.0, &self.operator, tenant, id, text),
            (None, Some(remote)) => remote
                .reload(text)
                .map_err(|e| ApiError::not_reloaded(e, &tenant.name)),
            (None, None) => Err(ApiError::internal("the run has nothing to reload")),
        };
        if let Ok(Reloaded::Applied { .. }) = &outcome {
            self.store.set_config(id, text)?;
        }
        crate::telemetry::events::RunReloaded {
            run_id: id,
            tenant: &run.tenant,
            outcome: outcome
                .as_ref()
                .map(|view| view as &dyn std::fmt::Debug)
                .map_err(|e| e as &dyn crate::telemetry::events::Why),
        }
        .emit();
        outcome
    }

    /// Reload every live run with its own config (SIGHUP, `--watch`):
    /// those whose stage plugins changed take the new ones up.
    pub fn reload_all(&self) {
        let ids: Vec<String> = self.lock().runs.keys().cloned().collect();
        for id in ids {
            // Each outcome is logged; a run that ended meanwhile is skipped.
            let _ = self.reload(&Principal::Admin, &id, None);
        }
    }

    /// The files of the plugin directory, which `weir serve --watch` watches
    /// (at most [`WATCHED_PLUGINS`]).
    pub fn plugin_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.operator.server.plugin_dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.path())
                    .filter(|path| path.is_file())
                    .take(WATCHED_PLUGINS)
                    .collect()
            })
            .unwrap_or_default()
    }
}
