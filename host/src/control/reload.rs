//! Reloading a live run of `weir serve`: with a tenant's new config
//! (`PUT /api/runs/{id}/config`), or with its own config again, on SIGHUP
//! and with `--watch`, so that a plugin changed on disk is taken up. A new
//! config is admitted as a submitted one is, then handed to the run's
//! [`Runner::reload`]: only pipelines' stages change while a run goes on.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::operator::{OperatorConfig, TenantPolicy};
use super::{ApiError, admit, run_dir};
use crate::run::{ReloadRefused, Reloaded, Runner};

/// How long the server waits for a run's process to answer a reload: the
/// reload waits up to 30 s for workers to switch, validation comes first.
pub(super) const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// Why a run's process did not reload, as it tells the server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ReloadFailure {
    Forbidden(Vec<String>),
    Invalid(Vec<String>),
    NeedsRestart(Vec<String>),
    Failed(String),
}

impl ReloadFailure {
    pub(super) fn of(error: ApiError) -> Self {
        match error {
            ApiError::Forbidden { problems, .. } => Self::Forbidden(problems),
            ApiError::Invalid(problems) => Self::Invalid(problems),
            ApiError::NeedsRestart(sections) => Self::NeedsRestart(sections),
            other => Self::Failed(other.to_string()),
        }
    }

    pub(super) fn into_error(self, tenant: &str) -> ApiError {
        match self {
            Self::Forbidden(problems) => ApiError::Forbidden {
                tenant: tenant.to_owned(),
                problems,
            },
            Self::Invalid(problems) => ApiError::Invalid(problems),
            Self::NeedsRestart(sections) => ApiError::NeedsRestart(sections),
            Self::Failed(error) => ApiError::Internal(error),
        }
    }
}

/// Admit `text` for run `id` of `tenant` as a submitted config is, and
/// reload `runner` with it; the old stages go on when it is refused.
pub(super) fn reload(
    runner: &Runner,
    operator: &OperatorConfig,
    tenant: &TenantPolicy,
    id: &str,
    text: &str,
) -> Result<Reloaded, ApiError> {
    let dead_letters = run_dir(operator, id).join("dead-letters.jsonl");
    let mut config = admit::admit(text, tenant, operator, &dead_letters)
        .map_err(|refusal| ApiError::refused(refusal, &tenant.name))?;
    config.runner.cache_dir = operator.server.cache_dir.clone();
    match runner.reload(config) {
        Ok(reloaded) => Ok(reloaded),
        Err(ReloadRefused::Invalid(errors)) => Err(ApiError::Invalid(
            errors.0.iter().map(ToString::to_string).collect(),
        )),
        Err(ReloadRefused::NeedsRestart(sections)) => Err(ApiError::NeedsRestart(sections)),
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
