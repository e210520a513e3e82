//! The HTTP API of `weir serve` and its status page.
//!
//! | Method and path | What it does |
//! | --- | --- |
//! | `POST /api/runs` | submit a run: the body is its config (TOML) |
//! | `GET /api/runs?limit=&before=` | a page of the caller's runs, newest first, with live counts |
//! | `GET /api/runs/{id}` | one run: counts, status, throughput, summary |
//! | `POST /api/runs/{id}/pause`, `/resume`, `/stop` | control a live run |
//! | `PUT /api/runs/{id}/config` | reload a live run with a new config (the body): only its stages may change |
//! | `POST /api/runs/{id}/reload` | reload a live run with its own config: its changed plugins are taken up |
//! | `POST /api/runs/{id}/documents?source=` | push documents (JSON lines) to the run's `grants.push` source (`push.rs`) |
//! | `GET /api/runs/{id}/dead-letters?offset=&limit=` | a page of the run's failed documents |
//! | `GET /api/runs/{id}/state?connector=&keys=&after=` | what the syncing connectors of the run's config keep (`weir state show`) |
//! | `POST /api/runs/{id}/state/reset?connector=` | clear it: their next run is a full sync (`weir state reset`) |
//! | `GET, POST /api/schedules`, `GET, PUT, DELETE /api/schedules/{id}` | schedules: configs the plane starts runs of on time (`schedules/api.rs`) |
//! | `GET /api/fleet` | the fleet's workers, what they serve, each pipeline's lag (the operator's) |
//! | `GET /api/fleet/plugins/{sha256}` | a plugin a spec names, for fleet workers (the fleet's token) |
//! | `GET /` | the status page |
//! | `GET /metrics` | the server's metrics: the operator's token only |
//! | `GET /healthz`, `/readyz` | health, for anyone |
//!
//! Every `/api` request (and `/metrics`) carries `Authorization: Bearer
//! <token>`: 401 without a known token, 404 for a run that is not the
//! caller's, 403 for a tenant asking for `/metrics` (it names every
//! tenant's pipelines), 429 with `Retry-After` over the token's rate. The
//! token is checked before a body is read: a request without one is
//! answered without reading what it sends. Every answer says `nosniff`; the
//! status page also carries a content security policy that forbids
//! framing it.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::body::{MAX_CONFIG_BYTES, read_config};
use super::letters::{DEFAULT_LETTERS, MAX_LETTERS};
use super::store::Cursor;
use super::{ApiError, ControlPlane, LetterPage, Principal, RunPage, RunView};
use crate::telemetry::export::Health;

/// The status page: one file, no build step.
const PAGE: &str = include_str!("page.html");

/// Runs in a page unless the caller asks for fewer.
const DEFAULT_RUNS: usize = 50;
/// Most runs a caller may ask for in one page.
const MAX_RUNS: usize = 500;

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
        .route("/api/runs/{id}/state", get(sync_state))
        .route("/api/runs/{id}/state/reset", post(reset_sync_state))
        .route("/api/runs/{id}/tap", get(tap))
        .route("/api/runs/{id}/trace/{doc}", get(trace))
        .route("/api/runs/{id}/config", axum::routing::put(reconfigure))
        .merge(super::schedules::routes())
        .merge(super::push::routes())
        .route("/api/fleet", get(fleet))
        .route("/api/fleet/plugins/{sha256}", get(fleet_plugin))
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

/// `GET /api/fleet`: what the fleet's workers serve, for the operator.
async fn fleet(State(plane): State<Plane>, who: Principal) -> Result<Response, ApiError> {
    let plane = Arc::clone(&plane);
    let view = tokio::task::spawn_blocking(move || plane.fleet_view(&who))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(view).into_response())
}

/// `GET /api/fleet/plugins/{sha256}`: a plugin a spec names, for a fleet
/// worker (the fleet's token); 404 for anyone else or any other hash.
async fn fleet_plugin(
    State(plane): State<Plane>,
    Path(sha256): Path<String>,
    headers: axum::http::HeaderMap,
) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let found = tokio::task::spawn_blocking(move || {
        plane
            .fleet_plugin(&token, &sha256)
            .and_then(|path| std::fs::read(path).ok())
    })
    .await
    .ok()
    .flatten();
    match found {
        Some(bytes) => ([(header::CONTENT_TYPE, "application/wasm")], bytes).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
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

/// `POST /api/runs`. The caller is known before the body is read. A
/// config with a `[schedule]` is kept as a schedule (answered as
/// `POST /api/schedules` answers).
async fn submit(
    State(plane): State<Plane>,
    who: Principal,
    body: Body,
) -> Result<Response, ApiError> {
    let config = read_config(body, plane.operator.server.body_read_timeout).await?;
    if super::schedules::carries_schedule(&config) {
        return super::schedules::create_from(plane, who, config).await;
    }
    // Admission loads and checks the plugins: work for a blocking thread.
    let run = tokio::task::spawn_blocking(move || plane.submit(&who, &config))
        .await
        .map_err(ApiError::internal)??;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

/// `?limit=&before=` of a list of runs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsQuery {
    limit: Option<String>,
    before: Option<String>,
}

/// `?offset=&limit=` of a page of dead letters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LettersQuery {
    offset: Option<String>,
    limit: Option<String>,
}

/// `?connector=&keys=&after=` of a run's sync state.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateAsked {
    connector: Option<String>,
    keys: Option<String>,
    after: Option<String>,
}

/// `?connector=` of a reset.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetAsked {
    connector: Option<String>,
}

/// A query that parses, or 400 saying why not.
fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::BadRequest(e.body_text()))
}

/// `limit=`: from 1 to `max`, `default` when not given.
fn limit(text: Option<&str>, default: usize, max: usize) -> Result<usize, ApiError> {
    match text.map(str::parse::<usize>) {
        None => Ok(default),
        Some(Ok(n)) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::BadRequest(format!(
            "limit: must be a whole number from 1 to {max}"
        ))),
    }
}

// Each handler takes its caller after its path, so a request without a
// known token is refused (401) before its query is read, and before its
// body: a body comes last, after the caller.

async fn list(
    State(plane): State<Plane>,
    who: Principal,
    asked: Result<Query<RunsQuery>, QueryRejection>,
) -> Result<Json<RunPage>, ApiError> {
    let asked = query(asked)?;
    let limit = limit(asked.limit.as_deref(), DEFAULT_RUNS, MAX_RUNS)?;
    let before = asked
        .before
        .map(|text| {
            Cursor::parse(&text).ok_or_else(|| {
                ApiError::BadRequest(
                    "before: not a cursor of this server: use the `next` of a page".into(),
                )
            })
        })
        .transpose()?;
    plane.list(&who, before.as_ref(), limit).map(Json)
}

async fn one(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
) -> Result<Json<RunView>, ApiError> {
    plane.get(&who, &id).map(Json)
}

/// `POST /api/runs/{id}/pause`, `/resume`, `/stop` or `/reload`.
async fn control(
    State(plane): State<Plane>,
    Path((id, action)): Path<(String, String)>,
    who: Principal,
) -> Result<Response, ApiError> {
    match action.as_str() {
        "pause" => plane.pause(&who, &id),
        "resume" => plane.resume(&who, &id),
        "stop" => plane.stop(&who, &id),
        "reload" => return reload(plane, who, id, None).await,
        _ => Err(ApiError::NoSuchAction(action)),
    }
    .map(|view| Json(view).into_response())
}

/// `PUT /api/runs/{id}/config`: reload the run with the config sent.
async fn reconfigure(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
    body: Body,
) -> Result<Response, ApiError> {
    let config = read_config(body, plane.operator.server.body_read_timeout).await?;
    reload(plane, who, id, Some(config)).await
}

/// Reload run `id` (loading plugins, waiting for workers: a blocking thread's work).
async fn reload(
    plane: Plane,
    who: Principal,
    id: String,
    config: Option<String>,
) -> Result<Response, ApiError> {
    let view = tokio::task::spawn_blocking(move || plane.reload(&who, &id, config.as_deref()))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(view).into_response())
}

/// `GET /api/runs/{id}/tap?pipeline=&stage=&limit=&percent=&seconds=`:
/// the run's live documents as JSON lines (see `weir tap`).
async fn tap(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
    asked: Result<Query<crate::telemetry::tap::TapQuery>, QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let asked = query(asked)?;
    plane.tap(&who, &id, &asked)
}

/// `GET /api/runs/{id}/trace/{doc}`: what run `id`'s trace says of
/// document `doc` (`{"run", "at", "generations", "lines", "cut"}`), 404
/// when it names it not, or the run kept no trace.
async fn trace(
    State(plane): State<Plane>,
    Path((id, doc)): Path<(String, String)>,
    who: Principal,
) -> Result<Json<crate::run::trace::RunHistory>, ApiError> {
    // The file is read from disk: work for a blocking thread.
    tokio::task::spawn_blocking(move || plane.trace(&who, &id, &doc))
        .await
        .map_err(ApiError::internal)??
        .map(Json)
        .ok_or_else(|| ApiError::NoState("the run's trace does not name this document".into()))
}

async fn dead_letters(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
    asked: Result<Query<LettersQuery>, QueryRejection>,
) -> Result<Json<LetterPage>, ApiError> {
    let asked = query(asked)?;
    let limit = limit(asked.limit.as_deref(), DEFAULT_LETTERS, MAX_LETTERS)?;
    let offset = match asked.offset.as_deref().map(str::parse::<u64>) {
        None => 0,
        Some(Ok(offset)) => offset,
        Some(Err(_)) => {
            return Err(ApiError::BadRequest(
                "offset: must be a byte offset: 0, or a page's next_offset".into(),
            ));
        }
    };
    // The file is read from disk: work for a blocking thread.
    tokio::task::spawn_blocking(move || plane.dead_letters(&who, &id, offset, limit))
        .await
        .map_err(ApiError::internal)?
        .map(Json)
}

/// `GET /api/runs/{id}/state`: what the syncing connectors of the run's
/// config keep, `{"syncs": [...]}` (loads its plugins: a blocking
/// thread's work).
async fn sync_state(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
    asked: Result<Query<StateAsked>, QueryRejection>,
) -> Result<Response, ApiError> {
    let asked = query(asked)?;
    let keys = match asked.keys.as_deref().map(str::parse::<usize>) {
        None => crate::run::DEFAULT_SHOWN_KEYS,
        Some(Ok(n)) if n <= crate::run::MAX_SHOWN_KEYS => n,
        Some(_) => {
            return Err(ApiError::BadRequest(format!(
                "keys: must be a whole number from 0 to {}",
                crate::run::MAX_SHOWN_KEYS
            )));
        }
    };
    let asked = crate::run::StateQuery {
        connector: asked.connector,
        keys,
        after: asked.after,
    };
    let syncs = tokio::task::spawn_blocking(move || plane.sync_states(&who, &id, &asked))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(serde_json::json!({ "syncs": syncs })).into_response())
}

/// `POST /api/runs/{id}/state/reset`: clear what the syncing connectors of
/// the run's config keep, `{"reset": [...]}`.
async fn reset_sync_state(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
    asked: Result<Query<ResetAsked>, QueryRejection>,
) -> Result<Response, ApiError> {
    let asked = query(asked)?;
    let resets = tokio::task::spawn_blocking(move || {
        plane.reset_sync_states(&who, &id, asked.connector.as_deref())
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(serde_json::json!({ "reset": resets })).into_response())
}
