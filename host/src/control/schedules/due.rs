//! A start that came due: written down first (the schedule's next start
//! and the run about to start), then made; or skipped, and said so.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::kept::{self, Skip};
use super::{ControlPlane, LATE_AFTER, at, ms, shown};
use crate::telemetry::events::{ScheduleStart, Scheduled};

impl ControlPlane {
    /// Make (or skip) the start of schedule `id` due by `now`.
    pub(super) fn start_due(self: &Arc<Self>, id: &str, now: DateTime<Utc>) {
        let mut entries = self.schedules.lock();
        let Some(entry) = entries.get_mut(id) else {
            return;
        };
        let (Some(due_ms), Some(next_ms)) = (entry.kept.due_ms, entry.kept.next_ms) else {
            return;
        };
        if next_ms > ms(now) {
            return;
        }
        let Some(tenant) = self.operator.tenant(&entry.kept.tenant) else {
            entry.kept.due_ms = None;
            entry.kept.next_ms = None;
            entry.kept.last_error =
                Some("the tenant is no longer in the operator's file: no more starts".into());
            if let Err(e) = self.keep_schedule(&entry.kept) {
                tracing::error!(schedule = %id, error = %e, "cannot keep the schedule");
            }
            return;
        };
        let tenant_name = entry.kept.tenant.clone();
        // The starts after this one that are due too: missed (the plane
        // was down, or not leading), skipped whatever becomes of this one.
        let following = entry.schedule.following(at(due_ms), now);
        let missed = following.map_or(0, |(_, missed)| missed);
        let late_by = (now - at(next_ms)).to_std().unwrap_or_default();
        let late_by = Duration::from_secs(late_by.as_secs());
        let mut skip: Option<(Scheduled, String)> = None;
        if late_by > LATE_AFTER {
            skip = Some((
                Scheduled::Late,
                format!(
                    "due at {}, {} ago: later than a start is made ({}s)",
                    shown(next_ms).unwrap_or_default(),
                    humantime::format_duration(late_by),
                    LATE_AFTER.as_secs()
                ),
            ));
        } else if let Some(last) = entry.kept.last_run.as_ref().filter(|r| self.going_on(r)) {
            skip = Some((
                Scheduled::Overlap,
                format!(
                    "due at {}: run {last} is still going on",
                    shown(next_ms).unwrap_or_default()
                ),
            ));
        }
        let starting = match skip {
            Some(_) => None,
            None => match self.reserve(tenant) {
                Ok(starting) => Some(starting),
                Err(e) => {
                    skip = Some((Scheduled::AtQuota, e.to_string()));
                    None
                }
            },
        };
        let run_id = starting.as_ref().map(|_| crate::run::new_run_id());
        let before = entry.kept.clone();
        let mut next = before.clone();
        next.due_ms = following.map(|(due, _)| ms(due));
        next.next_ms = following.map(|(due, _)| ms(entry.schedule.jittered(due)));
        let skipped = missed + u64::from(skip.is_some());
        if let Some(run) = &run_id {
            next.last_start_ms = Some(ms(now));
            next.last_run = Some(run.clone());
            next.last_error = None;
        }
        if skipped > 0 {
            let (reason, message) = match &skip {
                Some((reason, message)) => (*reason, message.clone()),
                None => (
                    Scheduled::Late,
                    format!("{missed} start(s) fell due while no control plane was leading"),
                ),
            };
            next.skipped = next.skipped.saturating_add(skipped);
            next.last_skip = Some(Skip {
                at_ms: ms(now),
                count: skipped,
                reason: reason.label().into(),
                message,
            });
        }
        // Written down before the start: a plane that reads it never makes it again.
        let linked = match &run_id {
            Some(run) => kept::link(&self.store, run, id).map_err(|e| e.to_string()),
            None => Ok(()),
        };
        let written = linked.and_then(|()| self.keep_schedule(&next));
        let emit = |outcome: Scheduled, count: u64, run_id: Option<&str>, detail: &str| {
            ScheduleStart {
                tenant: &tenant_name,
                schedule: id,
                outcome,
                count,
                run_id,
                detail,
            }
            .emit();
        };
        if missed > 0 {
            emit(
                Scheduled::Late,
                missed,
                None,
                &format!("{missed} start(s) fell due while no control plane was leading"),
            );
        }
        if let Some((reason, message)) = &skip {
            emit(*reason, 1, before.last_run.as_deref(), message);
        }
        if let (Some(run), Err(e)) = (&run_id, &written) {
            // Not written down: not made, or a plane taking over could make it again.
            let _ = kept::unlink(&self.store, run);
            next.last_start_ms = before.last_start_ms;
            next.last_run = before.last_run.clone();
            next.last_error = Some(format!("the start was not made: {e}"));
            emit(Scheduled::Unkept, 1, None, e);
            entry.kept = next;
            return;
        }
        if let Err(e) = &written {
            tracing::error!(schedule = %id, error = %e, "cannot keep the schedule's next start");
        }
        let Some(run) = run_id else {
            entry.kept = next;
            return;
        };
        let config = next.config.clone();
        entry.kept = next;
        match self.start_as(tenant, run.clone(), &config, false) {
            Ok((_, thread)) => {
                let mut live = self.lock();
                live.threads.retain(|t| !t.is_finished());
                live.threads.push(thread);
                drop(live);
                emit(
                    Scheduled::Started,
                    1,
                    Some(&run),
                    &format!("due at {}", shown(next_ms).unwrap_or_default()),
                );
            }
            Err(e) => {
                let _ = kept::unlink(&self.store, &run);
                entry.kept.last_run = before.last_run.clone();
                entry.kept.last_error = Some(format!("run {run} did not start: {e}"));
                if let Err(e) = self.keep_schedule(&entry.kept) {
                    tracing::error!(schedule = %id, error = %e, "cannot keep the schedule");
                }
                emit(Scheduled::Failed, 1, Some(&run), &e.to_string());
            }
        }
        drop(starting);
    }
}
