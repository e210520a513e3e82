//! Why a request to the control plane was not done, and the one place that
//! turns it into an HTTP answer: a status and the JSON body
//! `{"error": "...", "problems": [...]}`.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::isolate::ReloadError;
use super::store::StoreError;
use crate::core::problem::Problems;
use crate::tenancy::process::protocol::Failure;
use crate::tenancy::refusal::Refusal;

/// Why a request was not done.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No `Authorization: Bearer` header (401).
    #[error("send your token: Authorization: Bearer <token>")]
    NoToken,
    /// A token that is nobody's (401).
    #[error("unknown token")]
    UnknownToken,
    /// A tenant's token asked for what only the operator reads (403).
    #[error("only the operator's token reads this")]
    OperatorOnly,
    /// The operator's token submitted a run (403).
    #[error("the operator's token does not submit runs: use a tenant's")]
    OperatorSubmits,
    /// A tenant's token whose tenant the operator's config no longer has (403).
    #[error("no such tenant")]
    NoSuchTenant,
    /// The token's requests are over its rate (429, with `Retry-After`).
    #[error(
        "too many requests with this token (server.requests_per_second, request_burst): \
         try again in {}s", super::rate::retry_after_secs(*retry_after)
    )]
    RateLimited { retry_after: Duration },
    /// The client's address sent too many unknown tokens (429, with
    /// `Retry-After`); its tokens are not looked up until then.
    #[error(
        "too many unknown tokens from your address: try again in {}s",
        super::rate::retry_after_secs(*retry_after)
    )]
    TooManyGuesses { retry_after: Duration },
    /// A submitted config over the largest there may be (413).
    #[error("the config is over {max} bytes: no config needs to be this large")]
    TooLarge { max: usize },
    /// A submitted config not sent in time (408).
    #[error(
        "the config was not sent within {}s (server.body_read_timeout)",
        .0.as_secs_f64()
    )]
    SlowBody(Duration),
    /// A query or a body that cannot be read as what it must be (400).
    #[error("{0}")]
    BadRequest(String),
    /// As many taps as the server holds are open (429).
    #[error("{max} taps are open on this server, its most at once: try again later")]
    TooManyTaps { max: usize },

    /// A tap the run's process refused (a pipeline or stage it lacks).
    #[error("{0}")]
    Tap(crate::telemetry::tap::TapRefusal),
    /// The tenant has as many taps open as one tenant may (429): other
    /// tenants' taps are not refused for it.
    #[error("tenant `{tenant}` has {max} taps open, its most at once: close one first")]
    TenantTaps { tenant: String, max: usize },
    /// A run submitted while the server stops (503).
    #[error("weir serve is shutting down")]
    ShuttingDown,
    /// The tenant's concurrency quota is used up (429).
    #[error(
        "tenant `{tenant}` has {going} runs going on, its most at once (max_concurrent_runs = {max})"
    )]
    TooManyRuns {
        tenant: String,
        going: usize,
        max: usize,
    },
    /// The config is not valid (400): each problem, with its location
    /// where it has one.
    #[error("the config is not valid")]
    Invalid(Problems),
    /// The config asks for what the tenant may not have (403).
    #[error("the config asks for what tenant `{tenant}` may not have")]
    Forbidden { tenant: String, problems: Problems },
    /// A run that does not exist or is not the caller's (404).
    #[error("no such run")]
    NoSuchRun,
    /// A schedule that does not exist or is not the caller's (404).
    #[error("no such schedule")]
    NoSuchSchedule,
    /// The tenant keeps as many schedules as it may (429).
    #[error(
        "tenant `{tenant}` keeps {max} schedules, its most (max_schedules = {max}): delete one first"
    )]
    TooManySchedules { tenant: String, max: usize },
    /// `POST /api/runs/{id}/{action}` with another action (404).
    #[error("no action `{0}`: pause, resume or stop")]
    NoSuchAction(String),
    /// Control of a run that has ended, with how it ended (409).
    #[error("the run has ended ({0})")]
    Ended(String),
    /// A reload changes what a running run cannot take up (409): one
    /// problem per section changed, at its key.
    #[error(
        "the new config changes {}, which a running run cannot take up (only pipelines' stages reload): submit it as a new run; the old config goes on",
        sections(.0).join(", ")
    )]
    NeedsRestart(Problems),
    /// No state is kept for a run's config yet (404).
    #[error("{0}")]
    NoState(String),
    /// State a live run holds cannot be reset (409).
    #[error("{0}")]
    StateInUse(String),
    /// A reload of the run is under way (409).
    #[error("a reload of this run is under way: ask again when it has answered")]
    Reloading,
    /// A push the run did not take (see `source::push::PushRefused`).
    #[error("{0}")]
    Push(crate::source::push::PushRefused),
    /// A push's body over the tenant's bound (413).
    #[error(
        "the body is over {max_mib} MiB, tenant `{tenant}`'s {limit}: push fewer lines at once"
    )]
    PushTooLarge {
        tenant: String,
        max_mib: u32,
        limit: crate::core::limit::Limit,
    },
    /// The tenant's pushed lines are over its rate (429, with
    /// `Retry-After`), or one push is over its burst (413, `retry_after`
    /// none).
    #[error("{lines} lines are over tenant `{tenant}`'s {limit} (its burst is {burst}){}", match retry_after { Some(wait) => format!(": try again in {}s", super::rate::retry_after_secs(*wait)), None => ": push fewer lines at once".into() })]
    PushRate {
        tenant: String,
        lines: usize,
        burst: u32,
        limit: crate::core::limit::Limit,
        retry_after: Option<Duration>,
    },
    /// The run's process ended, or the push was not answered in time (503).
    #[error("{0}")]
    PushUnanswered(String),
    /// The store failed (500).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else that failed on the server's side (500).
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A failure on the server's side, as its message.
    pub(super) fn internal(e: impl std::fmt::Display) -> Self {
        Self::Internal(e.to_string())
    }

    /// A config of `tenant` refused.
    pub(super) fn refused(refusal: impl Into<Refusal>, tenant: &str) -> Self {
        match refusal.into() {
            Refusal::Invalid(problems) => Self::Invalid(problems),
            Refusal::Forbidden(problems) => Self::Forbidden {
                tenant: tenant.to_owned(),
                problems,
            },
            Refusal::NeedsRestart(problems) => Self::NeedsRestart(problems),
        }
    }

    /// The refusal this answer is, if it is one (as a run's process tells
    /// it to the server); else the answer.
    pub(super) fn into_refusal(self) -> Result<Refusal, Self> {
        match self {
            Self::Invalid(problems) => Ok(Refusal::Invalid(problems)),
            Self::Forbidden { problems, .. } => Ok(Refusal::Forbidden(problems)),
            Self::NeedsRestart(problems) => Ok(Refusal::NeedsRestart(problems)),
            other => Err(other),
        }
    }

    /// What a run's process of `tenant` did not do (start its run, or
    /// reload it), as the API answers it.
    pub(super) fn failed(failure: Failure, tenant: &str) -> Self {
        match failure {
            Failure::Refused(refusal) => Self::refused(refusal, tenant),
            Failure::Failed(error) => Self::Internal(error),
        }
    }

    /// A reload asked of a run's process of `tenant` that was not done.
    pub(super) fn not_reloaded(error: ReloadError, tenant: &str) -> Self {
        match error {
            ReloadError::Failed(failure) => Self::failed(failure, tenant),
            ReloadError::Late => Self::Internal(
                "the run's process did not answer the reload in time: it may still take it up"
                    .into(),
            ),
            ReloadError::Gone => Self::Ended("the run's process ended".into()),
        }
    }

    /// This answer as a run's process tells the server (the refusal it
    /// is, or the failure it says).
    pub(super) fn into_failure(self) -> Failure {
        match self.into_refusal() {
            Ok(refusal) => Failure::Refused(refusal),
            Err(other) => Failure::Failed(other.to_string()),
        }
    }

    /// The HTTP status of this answer.
    pub fn status(&self) -> StatusCode {
        use crate::source::push::PushRefused;
        match self {
            Self::Push(PushRefused::Full { .. })
            | Self::PushRate {
                retry_after: Some(_),
                ..
            } => StatusCode::TOO_MANY_REQUESTS,
            Self::Push(PushRefused::TooMany { .. })
            | Self::PushTooLarge { .. }
            | Self::PushRate { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Push(PushRefused::Ambiguous(_)) => StatusCode::BAD_REQUEST,
            Self::Push(PushRefused::NoSource(_) | PushRefused::Closed) => StatusCode::CONFLICT,
            Self::PushUnanswered(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::NoToken | Self::UnknownToken => StatusCode::UNAUTHORIZED,
            Self::OperatorOnly
            | Self::OperatorSubmits
            | Self::NoSuchTenant
            | Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooManyRuns { .. }
            | Self::TooManySchedules { .. }
            | Self::RateLimited { .. }
            | Self::TooManyGuesses { .. }
            | Self::TooManyTaps { .. }
            | Self::TenantTaps { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::SlowBody(_) => StatusCode::REQUEST_TIMEOUT,
            Self::Invalid(_) | Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Tap(crate::telemetry::tap::TapRefusal::TooMany { .. }) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Self::NoSuchRun
            | Self::NoSuchSchedule
            | Self::NoSuchAction(_)
            | Self::NoState(_)
            | Self::Tap(_) => StatusCode::NOT_FOUND,
            Self::Ended(_) | Self::NeedsRestart(_) | Self::Reloading | Self::StateInUse(_) => {
                StatusCode::CONFLICT
            }
            Self::Store(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// How long the caller should wait before it asks again, when a rate
    /// limit refused it.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after } | Self::TooManyGuesses { retry_after } => {
                Some(*retry_after)
            }
            Self::PushRate {
                retry_after: Some(wait),
                ..
            } => Some(*wait),
            // A full run: room comes as its connector publishes.
            Self::Push(crate::source::push::PushRefused::Full { .. }) => {
                Some(Duration::from_secs(1))
            }
            _ => None,
        }
    }

    /// Each problem of a refused config (with its location, where it has
    /// one), or each section a reload may not change; none for other
    /// answers.
    pub fn problems(&self) -> Vec<String> {
        match self {
            Self::Invalid(problems) | Self::Forbidden { problems, .. } => {
                problems.iter().map(ToString::to_string).collect()
            }
            Self::NeedsRestart(problems) => sections(problems),
            _ => Vec::new(),
        }
    }
}

/// The sections a reload may not change, as their keys.
fn sections(problems: &Problems) -> Vec<String> {
    problems.iter().map(|p| p.location.clone()).collect()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string(), "problems": self.problems() });
        let mut response = (self.status(), axum::Json(body)).into_response();
        if let Some(wait) = self.retry_after() {
            let secs = super::rate::retry_after_secs(wait);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::problem::Problem;

    /// A refusal keeps its problems' locations and messages up to the
    /// answer, which shows them as it always has: each problem as text, or
    /// for a reload that needs a restart, each section's key.
    #[test]
    fn a_refusal_is_answered_with_its_problems_as_before() {
        let problems: Problems = [
            Problem::new("connectors.c.plugin.path", "not yours"),
            Problem::whole("the whole config"),
        ]
        .into_iter()
        .collect();
        let forbidden = ApiError::refused(Refusal::Forbidden(problems.clone()), "acme");
        assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            forbidden.problems(),
            ["connectors.c.plugin.path: not yours", "the whole config"]
        );
        let back = forbidden.into_failure();
        assert_eq!(back, Failure::Refused(Refusal::Forbidden(problems)));
        let sections: Problems = [
            Problem::new("worker", "changed"),
            Problem::new("pipelines.books.indexer", "changed"),
        ]
        .into_iter()
        .collect();
        let restart = ApiError::failed(Failure::Refused(Refusal::NeedsRestart(sections)), "acme");
        assert_eq!(restart.status(), StatusCode::CONFLICT);
        assert_eq!(restart.problems(), ["worker", "pipelines.books.indexer"]);
        assert!(
            restart
                .to_string()
                .starts_with("the new config changes worker, pipelines.books.indexer, "),
            "{restart}"
        );
        let internal = ApiError::failed(Failure::Failed("no tenant `x`".into()), "acme");
        assert_eq!(internal.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(internal.to_string(), "no tenant `x`");
    }
}
