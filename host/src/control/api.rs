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
//! | `GET /metrics` | the server's metrics: the operator's token only |
//! | `GET /healthz`, `/readyz` | health, for anyone |
//!
//! Every `/api` request (and `/metrics`) carries `Authorization: Bearer
//! <token>`: 401 without a known token, 404 for a run that is not the
//! caller's, 403 for a tenant asking for `/metrics` (it names every
//! tenant's pipelines). Every answer says `nosniff`; the status page also
//! carries a content security policy that forbids framing it.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::{ApiError, ControlPlane, Principal, RunView};
use crate::telemetry::export::Health;

/// The status page: one file, no build step.
const PAGE: &str = include_str!("page.html");

/// Largest config a tenant may submit.
const MAX_CONFIG_BYTES: usize = 1 << 20;

type Plane = Arc<ControlPlane>;

/// The API and the status page, on `plane`. Tested without a server in
/// `control/tests.rs`.
pub fn routes(plane: Arc<ControlPlane>) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/api/runs", post(submit).get(list))
        .route("/api/runs/{id}", get(one))
        .route("/api/runs/{id}/{action}", post(control))
        .route("/api/runs/{id}/dead-letters", get(dead_letters))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_CONFIG_BYTES))
        .layer(axum::middleware::map_response(no_sniffing))
        .with_state(plane)
}

/// Everything `weir serve` answers on its address: [`routes`], `/healthz`
/// and `/readyz` as `health` says, and `/metrics` for the operator only.
pub fn server_routes(
    plane: Arc<ControlPlane>,
    health: &Health,
) -> Result<Router, crate::telemetry::export::RecorderError> {
    let idle = plane.operator.server.metrics_idle_timeout;
    let handle = crate::telemetry::export::expiring_recorder(idle)?;
    let all = {
        let plane = Arc::clone(&plane);
        move || plane.metrics_text(&crate::telemetry::export::render(&handle))
    };
    let own = all.clone();
    let metrics = Router::new()
        .route(
            "/metrics",
            get(move |who: Principal| {
                let text = matches!(who, Principal::Admin)
                    .then(|| crate::telemetry::export::text_response(all()));
                async move { text.ok_or(ApiError::OperatorOnly) }
            }),
        )
        // Each tenant's own figures; the operator's are all of them.
        .route(
            "/api/metrics",
            get(move |who: Principal| {
                let text = own();
                let text = match &who {
                    Principal::Admin => text,
                    Principal::Tenant(name) => crate::telemetry::export::tenant_lines(&text, name),
                };
                async move { crate::telemetry::export::text_response(text) }
            }),
        )
        .layer(axum::middleware::map_response(no_sniffing))
        .with_state(Arc::clone(&plane));
    Ok(routes(plane)
        .merge(metrics)
        .merge(crate::telemetry::export::health_routes(health.clone())))
}

/// The status page, with headers that keep it from being framed or fed
/// scripts from elsewhere.
async fn status_page() -> impl IntoResponse {
    (
        [
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; \
                 frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        Html(PAGE),
    )
}

/// Every answer: its content type is what it says.
async fn no_sniffing(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
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
