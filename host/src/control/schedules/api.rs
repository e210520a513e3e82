//! The schedules' routes, merged into the API's:
//!
//! | Method and path | What it does |
//! | --- | --- |
//! | `POST /api/schedules` (or `POST /api/runs` with a `[schedule]`) | keep a schedule: the body is its config (TOML) |
//! | `GET /api/schedules` | the caller's schedules, with next and last starts |
//! | `GET /api/schedules/{id}` | one, with its config |
//! | `PUT /api/schedules/{id}` | replace its config (and schedule) |
//! | `DELETE /api/schedules/{id}` | delete it: it starts nothing more |

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::super::body::read_config;
use super::super::{ApiError, ControlPlane, Principal};

type Plane = Arc<ControlPlane>;

/// The schedules' routes, on the plane the API's router is given.
pub(in crate::control) fn routes() -> Router<Plane> {
    Router::new()
        .route("/api/schedules", get(list).post(create))
        .route("/api/schedules/{id}", get(one).put(replace).delete(delete))
}

async fn list(State(plane): State<Plane>, who: Principal) -> Response {
    Json(serde_json::json!({ "schedules": plane.schedules(&who) })).into_response()
}

async fn one(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
) -> Result<Response, ApiError> {
    Ok(Json(plane.schedule(&who, &id)?).into_response())
}

/// `POST /api/schedules`: 201 with the schedule. The caller is known
/// before the body is read.
pub(in crate::control) async fn create(
    State(plane): State<Plane>,
    who: Principal,
    body: Body,
) -> Result<Response, ApiError> {
    let config = read_config(body, plane.operator.server.body_read_timeout).await?;
    create_from(plane, who, config).await
}

/// Keep `config` of `who` as a schedule: admission reads its plugins, a
/// blocking thread's work.
pub(in crate::control) async fn create_from(
    plane: Plane,
    who: Principal,
    config: String,
) -> Result<Response, ApiError> {
    let view = tokio::task::spawn_blocking(move || plane.create_schedule(&who, &config))
        .await
        .map_err(ApiError::internal)??;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

async fn replace(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
    body: Body,
) -> Result<Response, ApiError> {
    let config = read_config(body, plane.operator.server.body_read_timeout).await?;
    let view = tokio::task::spawn_blocking(move || plane.replace_schedule(&who, &id, &config))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(view).into_response())
}

async fn delete(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
) -> Result<Response, ApiError> {
    // Under a fleet the deletion waits for the cluster.
    let view = tokio::task::spawn_blocking(move || plane.delete_schedule(&who, &id))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(view).into_response())
}
