//! `POST /api/runs/{id}/documents?source=`: a tenant pushes documents (JSON
//! lines, one object a line) to its run, whose connector receives them from
//! its `grants.push` source (`source/push`), in the run's process or on
//! this one's threads.
//!
//! In order: the caller and its run (404 another's, 409 one that ended),
//! the body within the tenant's `push.max_body_mib` (413), each line a JSON
//! object (400 naming each line that is not, nothing taken), the lines
//! within the tenant's `push.lines_per_second` and burst (429 with
//! `Retry-After`, shared by its runs; 413 over the burst), then the run:
//! 202 `{"accepted", "dead_lettered": [{"line", "reason"}], "abandoned"}`
//! once its connector has published every line's documents into the run's
//! queue or topic (or refused the line: dead-lettered as any source's), or
//! 429 with `Retry-After` when the run holds its `buffer` of lines.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;

use super::body::read_body;
use super::live::LiveRun;
use super::rate::{Allowance, Rate};
use super::{ApiError, ControlPlane, Principal};
use crate::core::limit::Limit;
use crate::core::problem::{Problem, Problems};
use crate::source::push::{Answer, Line, PushRefused};
use crate::telemetry::events::{PushOutcome, Pushed};
use crate::tenancy::operator::TenantPolicy;

type Plane = Arc<ControlPlane>;

/// How long a push waits for its run's answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);
/// Lines not JSON objects named in a refusal, at most.
const NAMED: usize = 100;

/// Each tenant's allowance of pushed lines, shared by its runs.
#[derive(Debug, Default)]
pub(super) struct PushRates(Mutex<HashMap<String, Arc<Allowance>>>);

impl PushRates {
    fn of(&self, tenant: &TenantPolicy) -> Arc<Allowance> {
        let mut rates = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let rate = Rate::new(
            f64::from(tenant.push.lines_per_second),
            f64::from(tenant.push.burst()),
        );
        Arc::clone(
            rates
                .entry(tenant.name.clone())
                .or_insert_with(|| Arc::new(Allowance::new(rate))),
        )
    }
}

pub(super) fn routes() -> Router<Plane> {
    Router::new().route("/api/runs/{id}/documents", post(push))
}

/// `?source=`: the run's push source, when it has several.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Asked {
    source: Option<String>,
}

async fn push(
    State(plane): State<Plane>,
    Path(id): Path<String>,
    who: Principal,
    asked: Result<Query<Asked>, QueryRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    let Query(asked) = asked.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let tenant = plane.tenant(&who)?.clone();
    let run = plane.live_run(&who, &id)?;
    let too_large = || ApiError::PushTooLarge {
        tenant: tenant.name.clone(),
        max_mib: tenant.push.max_body_mib,
        limit: Limit::PushBodyMib,
    };
    let timeout = plane.operator.server.body_read_timeout;
    let read = read_body(body, tenant.push.max_body_bytes(), timeout, too_large).await;
    let outcome = match read.and_then(|bytes| lines_of(&bytes)) {
        Ok(lines) => push_lines(&plane, &tenant, &run, asked.source, lines).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(answer) => Ok((StatusCode::ACCEPTED, Json(answer)).into_response()),
        Err(e) => {
            Pushed {
                tenant: &tenant.name,
                run_id: &id,
                outcome: PushOutcome::Refused(e.status().as_u16()),
                lines: 0,
                detail: &e.to_string(),
            }
            .emit();
            Err(e)
        }
    }
}

/// The lines of `body`, numbered from 1 (blank ones skipped), each a JSON
/// object; or 400 naming those that are not.
fn lines_of(body: &[u8]) -> Result<Vec<Line>, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        ApiError::Invalid(Problems::one(Problem::whole(format!(
            "the body is not UTF-8 text: {e}"
        ))))
    })?;
    let mut lines = Vec::new();
    let mut bad = Problems::default();
    let mut more_bad = 0_usize;
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let object = line.trim_start().starts_with('{')
            && serde_json::from_str::<serde::de::IgnoredAny>(line).is_ok();
        if !object {
            if bad.len() < NAMED {
                bad.at(format!("line {}", i + 1), "not a JSON object");
            } else {
                more_bad += 1;
            }
            continue;
        }
        lines.push(Line {
            number: i + 1,
            text: line.to_owned(),
        });
    }
    if more_bad > 0 {
        bad.push(Problem::whole(format!("and {more_bad} more lines")));
    }
    bad.or_ok(lines).map_err(ApiError::Invalid)
}

/// Push `lines` of `tenant` to `run` within the tenant's rate: its answer.
async fn push_lines(
    plane: &ControlPlane,
    tenant: &TenantPolicy,
    run: &LiveRun,
    source: Option<String>,
    lines: Vec<Line>,
) -> Result<Answer, ApiError> {
    let count = lines.len();
    if count == 0 {
        return Ok(Answer::default());
    }
    plane
        .push_rates
        .of(tenant)
        .take(count as f64, Instant::now())
        .map_err(|retry_after| ApiError::PushRate {
            tenant: tenant.name.clone(),
            lines: count,
            burst: tenant.push.burst(),
            limit: Limit::PushLinesPerSecond,
            retry_after,
        })?;
    let answer = forward(run, source, lines).await;
    let emit = |outcome, lines: usize, detail: &str| {
        Pushed {
            tenant: &tenant.name,
            run_id: &run.id,
            outcome,
            lines,
            detail,
        }
        .emit();
    };
    if let Ok(answer) = &answer {
        emit(PushOutcome::Accepted, answer.accepted as usize, "");
        if !answer.dead_lettered.is_empty() {
            emit(PushOutcome::DeadLettered, answer.dead_lettered.len(), "");
        }
        if answer.abandoned > 0 {
            emit(
                PushOutcome::Abandoned,
                answer.abandoned as usize,
                "the run stopped",
            );
        }
    }
    answer
}

/// Hand `lines` to `run`'s push source and wait for its answer.
async fn forward(
    run: &LiveRun,
    source: Option<String>,
    lines: Vec<Line>,
) -> Result<Answer, ApiError> {
    let gone = || {
        ApiError::PushUnanswered(
            "the run's process ended before it answered: push the lines again".into(),
        )
    };
    let late = || {
        ApiError::PushUnanswered(format!(
            "the run did not answer within {}s: some lines may have been taken",
            ANSWER_WITHIN.as_secs()
        ))
    };
    if let Some(remote) = run.remote() {
        let (push, answered) = remote.push(source, lines);
        return match tokio::time::timeout(ANSWER_WITHIN, answered).await {
            Ok(Ok(outcome)) => outcome.map_err(ApiError::Push),
            Ok(Err(_)) => Err(gone()),
            Err(_) => {
                remote.forget_push(push);
                Err(late())
            }
        };
    }
    let Some(local) = &run.local else {
        return Err(ApiError::Push(PushRefused::NoSource(String::new())));
    };
    let (answer, answered) = tokio::sync::oneshot::channel();
    local
        .0
        .pushes()
        .offer(
            source.as_deref(),
            lines,
            Box::new(move |a| drop(answer.send(a))),
        )
        .map_err(ApiError::Push)?;
    match tokio::time::timeout(ANSWER_WITHIN, answered).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err(gone()),
        Err(_) => Err(late()),
    }
}
