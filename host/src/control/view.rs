//! Runs as the API shows them: a run's record with its recent throughput;
//! a finished run's record and its summary as JSON (what `weir run` prints),
//! or how it failed when it panicked or its process died.

use crate::run::RunResult;

use super::live::LiveRun;
use crate::tenancy::record::{Counts, RunRecord, RunState, now_ms};

/// A run as the API shows it: the record, and for a live run its recent
/// throughput (documents indexed per second, one point a second).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunView {
    #[serde(flatten)]
    pub record: RunRecord,
    pub throughput: Vec<(u64, f64)>,
    /// The schedule that started it, if one did, with its next start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<super::RunSchedule>,
    /// A live continuous run's restarts (`service.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<super::restarts::ServiceView>,
}

/// A page of runs, newest first, and where the next starts (`before=`),
/// if there are more.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunPage {
    pub runs: Vec<RunView>,
    pub next: Option<String>,
}

/// A run's summary as JSON: what `weir run` prints.
fn summary_json(result: &RunResult) -> serde_json::Value {
    let connectors: Vec<_> = result
        .connectors
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.name,
                "pipeline": c.pipeline,
                "published": c.published,
                "children": c.created,
                "succeeded": c.succeeded,
                "failed": c.failed,
                "dropped": c.dropped,
                "deleted": c.deleted,
                "duplicates": c.duplicates,
                "elapsed_ms": c.elapsed.as_millis() as u64,
                "error": c.error,
                "skipped": c.skipped,
            })
        })
        .collect();
    let stages: Vec<_> = result
        .stages
        .iter()
        .map(|s| {
            serde_json::json!({
                "pipeline": s.pipeline,
                "stage": s.stage,
                "documents": s.documents,
                "children": s.children,
                "failed": s.failed,
                "skipped": s.skipped,
                "retries": s.retries,
                "time_ms": s.time.as_secs_f64() * 1000.0,
            })
        })
        .collect();
    serde_json::json!({
        "status": result.status().name(),
        "elapsed_ms": result.elapsed.as_millis() as u64,
        "connectors": connectors,
        "stages": stages,
    })
}

/// How `run` ended, as the store keeps it.
pub(super) fn finished_record(run: &LiveRun, result: &RunResult) -> RunRecord {
    let sum = |f: fn(&crate::run::ConnectorResult) -> u64| result.connectors.iter().map(f).sum();
    RunRecord {
        status: result.status().into(),
        finished_ms: Some(now_ms()),
        counts: Counts {
            published: sum(|c| c.published),
            processed: run.stats.snapshot().processed,
            indexed: sum(|c| c.succeeded),
            failed: sum(|c| c.failed),
            dropped: sum(|c| c.dropped),
        },
        summary: Some(summary_json(result)),
        error: result.connectors.iter().find_map(|c| c.error.clone()),
        ..run.record()
    }
}

/// The record of `run` once its runner returned `outcome`: how it ended,
/// or, for a panic, a failure with the panic's message.
pub(super) fn ended(run: &LiveRun, outcome: std::thread::Result<RunResult>) -> RunRecord {
    match outcome {
        Ok(result) => finished_record(run, &result),
        Err(panic) => {
            let why = crate::core::text::panic_text(&*panic);
            tracing::error!(run_id = %run.id, panic = %why, "the run stopped on a bug in Weir");
            RunRecord {
                status: RunState::Failure,
                finished_ms: Some(now_ms()),
                error: Some(format!(
                    "the run stopped on a bug in Weir (please report it): {why}"
                )),
                ..run.record()
            }
        }
    }
}

/// The record of `run` whose process died (`why`): a failure saying how.
pub(super) fn died(run: &LiveRun, why: &str) -> RunRecord {
    tracing::error!(run_id = %run.id, why = %why, "a run's process died");
    RunRecord {
        status: RunState::Failure,
        finished_ms: Some(now_ms()),
        error: Some(format!("the run's process died: {why}")),
        ..run.record()
    }
}
