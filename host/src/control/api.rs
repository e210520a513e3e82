//! The HTTP API of `weir serve` and its status page.
//!
//! | Method and path | What it does |
//! | --- | --- |
//! | `POST /api/runs` | submit a run: the body is its config (TOML) |
//! | `GET /api/runs` | the caller's runs, newest first, with live counts |
//! | `GET /api/runs/{id}` | one run: counts, status, throughput, summary |
//! | `POST /api/runs/{id}/pause`, `/resume`, `/stop` | control a live run |
//! | `GET /api/runs/{id}/dead-letters` | the run's failed documents |
//! | `GET /` | the status page |
//!
//! Every `/api` request carries `Authorization: Bearer <token>`: 401
//! without a known token, 404 for a run that is not the caller's.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::{ApiError, ControlPlane, Principal};

/// The status page: one file, no build step.
const PAGE: &str = include_str!("page.html");

/// Largest config a tenant may submit.
const MAX_CONFIG_BYTES: usize = 1 << 20;

type Plane = Arc<ControlPlane>;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::json!({ "error": self.message, "problems": self.problems });
        (status, axum::Json(body)).into_response()
    }
}

/// The API and the status page.
pub fn routes(plane: Arc<ControlPlane>) -> Router {
    Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/api/runs", post(submit).get(list))
        .route("/api/runs/{id}", get(one))
        .route("/api/runs/{id}/{action}", post(control))
        .route("/api/runs/{id}/dead-letters", get(dead_letters))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_CONFIG_BYTES))
        .with_state(plane)
}

/// Who sent `headers`, or 401.
fn principal(plane: &ControlPlane, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| ApiError::new(401, "send your token: Authorization: Bearer <token>"))?;
    plane
        .authenticate(token)
        .ok_or_else(|| ApiError::new(401, "unknown token"))
}

async fn submit(State(plane): State<Plane>, headers: HeaderMap, body: String) -> Response {
    let who = match principal(&plane, &headers) {
        Ok(who) => who,
        Err(e) => return e.into_response(),
    };
    // Admission loads and checks the plugins: work for a blocking thread.
    let submitted = tokio::task::spawn_blocking(move || plane.submit(&who, &body)).await;
    match submitted {
        Ok(Ok(run)) => (StatusCode::CREATED, axum::Json(run)).into_response(),
        Ok(Err(e)) => e.into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

#[derive(Debug, Deserialize)]
struct Limit {
    limit: Option<usize>,
}

impl Limit {
    fn get(&self) -> usize {
        self.limit.unwrap_or(100).clamp(1, 1000)
    }
}

async fn list(
    State(plane): State<Plane>,
    headers: HeaderMap,
    Query(limit): Query<Limit>,
) -> Response {
    let answer = principal(&plane, &headers).and_then(|who| plane.list(&who, limit.get()));
    respond(answer)
}

async fn one(State(plane): State<Plane>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    respond(principal(&plane, &headers).and_then(|who| plane.get(&who, &id)))
}

/// `POST /api/runs/{id}/pause`, `/resume` or `/stop`.
async fn control(
    State(plane): State<Plane>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    respond(
        principal(&plane, &headers).and_then(|who| match action.as_str() {
            "pause" => plane.pause(&who, &id),
            "resume" => plane.resume(&who, &id),
            "stop" => plane.stop(&who, &id),
            _ => Err(ApiError::new(
                404,
                format!("no action `{action}`: pause, resume or stop"),
            )),
        }),
    )
}

async fn dead_letters(
    State(plane): State<Plane>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(limit): Query<Limit>,
) -> Response {
    respond(principal(&plane, &headers).and_then(|who| plane.dead_letters(&who, &id, limit.get())))
}

fn respond<T: serde::Serialize>(answer: Result<T, ApiError>) -> Response {
    match answer {
        Ok(value) => axum::Json(value).into_response(),
        Err(e) => e.into_response(),
    }
}
