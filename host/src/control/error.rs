//! Why a request to the control plane was not done, and the one place that
//! turns it into an HTTP answer: a status and the JSON body
//! `{"error": "...", "problems": [...]}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::admit::Refusal;
use super::store::StoreError;

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
    Invalid(Vec<String>),
    /// The config asks for what the tenant may not have (403).
    #[error("the config asks for what tenant `{tenant}` may not have")]
    Forbidden {
        tenant: String,
        problems: Vec<String>,
    },
    /// A run that does not exist or is not the caller's (404).
    #[error("no such run")]
    NoSuchRun,
    /// `POST /api/runs/{id}/{action}` with another action (404).
    #[error("no action `{0}`: pause, resume or stop")]
    NoSuchAction(String),
    /// Control of a run that has ended, with how it ended (409).
    #[error("the run has ended ({0})")]
    Ended(String),
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

    /// A refusal of admission for `tenant`.
    pub(super) fn refused(refusal: Refusal, tenant: &str) -> Self {
        match refusal {
            Refusal::Invalid(problems) => {
                Self::Invalid(problems.iter().map(ToString::to_string).collect())
            }
            Refusal::Forbidden(problems) => Self::Forbidden {
                tenant: tenant.to_owned(),
                problems: problems.iter().map(ToString::to_string).collect(),
            },
        }
    }

    /// The HTTP status of this answer.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoToken | Self::UnknownToken => StatusCode::UNAUTHORIZED,
            Self::OperatorOnly
            | Self::OperatorSubmits
            | Self::NoSuchTenant
            | Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooManyRuns { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Invalid(_) => StatusCode::BAD_REQUEST,
            Self::NoSuchRun | Self::NoSuchAction(_) => StatusCode::NOT_FOUND,
            Self::Ended(_) => StatusCode::CONFLICT,
            Self::Store(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Each problem of a refused config; none for other answers.
    pub fn problems(&self) -> &[String] {
        match self {
            Self::Invalid(problems) | Self::Forbidden { problems, .. } => problems,
            _ => &[],
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string(), "problems": self.problems() });
        (self.status(), axum::Json(body)).into_response()
    }
}
