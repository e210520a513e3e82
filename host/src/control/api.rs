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

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::{ApiError, ControlPlane, Principal, RunView};

/// The status page: one file, no build step.
const PAGE: &str = include_str!("page.html");

/// Largest config a tenant may submit.
const MAX_CONFIG_BYTES: usize = 1 << 20;

type Plane = Arc<ControlPlane>;

/// The API and the status page, on `plane`. Tested without a server in
/// `control/tests.rs`.
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

async fn submit(
    State(plane): State<Plane>,
    who: Principal,
    body: String,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    // Admission loads and checks the plugins: work for a blocking thread.
    let run = tokio::task::spawn_blocking(move || plane.submit(&who, &body))
        .await
        .map_err(ApiError::internal)??;
    Ok((StatusCode::CREATED, Json(run)))
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

// Each handler takes its caller after its path and query, so a malformed
// path or query is refused (400) before the token is checked, as before
// the caller was an extractor. A submitted body comes last, after the caller.

async fn list(
    State(plane): State<Plane>,
    Query(limit): Query<Limit>,
    who: Principal,
) -> Result<Json<Vec<RunView>>, ApiError> {
    plane.list(&who, limit.get()).map(Json)
}

async fn one(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
) -> Result<Json<RunView>, ApiError> {
    plane.get(&who, &id).map(Json)
}

/// `POST /api/runs/{id}/pause`, `/resume` or `/stop`.
async fn control(
    State(plane): State<Plane>,
    Path((id, action)): Path<(String, String)>,
    who: Principal,
) -> Result<Json<RunView>, ApiError> {
    match action.as_str() {
        "pause" => plane.pause(&who, &id),
        "resume" => plane.resume(&who, &id),
        "stop" => plane.stop(&who, &id),
        _ => Err(ApiError::NoSuchAction(action)),
    }
    .map(Json)
}

async fn dead_letters(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    Query(limit): Query<Limit>,
    who: Principal,
) -> Result<Json<Vec<serde_json::Value>>, ApiError> {
    plane.dead_letters(&who, &id, limit.get()).map(Json)
}
