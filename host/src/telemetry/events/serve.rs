//! `weir serve`'s own events: schedules' starts and pushed documents.

use super::meters;

/// What became of a start of a schedule on `weir serve` that came due:
/// started, skipped (the last run goes on; late, when no plane led; the
/// tenant at `max_concurrent_runs`; not written down first), or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheduled {
    Started,
    Overlap,
    Late,
    AtQuota,
    Unkept,
    Failed,
}

impl Scheduled {
    /// Its label on `weir_scheduled_starts_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Overlap => "overlap",
            Self::Late => "late",
            Self::AtQuota => "quota",
            Self::Unkept => "unkept",
            Self::Failed => "failed",
        }
    }

    /// Why a skipped start was skipped, in words.
    fn why(self) -> &'static str {
        match self {
            Self::Overlap => {
                "the schedule's last run is still going on (runs of one schedule never overlap)"
            }
            Self::Late => "too late (no control plane was leading when it was due)",
            Self::AtQuota => "the tenant has max_concurrent_runs going on",
            Self::Unkept => {
                "it could not be written down first (a plane taking over could repeat it)"
            }
            Self::Started | Self::Failed => "",
        }
    }
}

/// `count` starts of `schedule` came due (several only when missed while
/// late): counted in `weir_scheduled_starts_total`, logged (a skip warns).
#[derive(Debug)]
pub(crate) struct ScheduleStart<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) schedule: &'a str,
    pub(crate) outcome: Scheduled,
    pub(crate) count: u64,
    /// The run started, or the last run (still going on, for an overlap).
    pub(crate) run_id: Option<&'a str>,
    pub(crate) detail: &'a str,
}

impl ScheduleStart<'_> {
    pub(crate) fn emit(self) {
        let Self {
            tenant,
            schedule,
            outcome,
            count,
            run_id,
            detail,
        } = self;
        meters::scheduled_starts(tenant, outcome.label(), count);
        match outcome {
            Scheduled::Started => {
                tracing::info!(tenant, schedule, run_id, detail, "scheduled run started");
            }
            Scheduled::Failed => {
                tracing::warn!(
                    tenant,
                    schedule,
                    run_id,
                    detail,
                    "scheduled run did not start"
                );
            }
            skipped => tracing::warn!(
                tenant,
                schedule,
                run_id,
                count,
                outcome = skipped.label(),
                detail,
                "scheduled start skipped: {}",
                skipped.why()
            ),
        }
    }
}

/// What became of lines pushed to a run (`weir serve`'s push endpoint),
/// or of a push refused whole (with its HTTP status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushOutcome {
    Accepted,
    DeadLettered,
    Abandoned,
    Refused(u16),
}

/// Lines pushed to run `run_id`: counted in `weir_pushed_lines_total`, a
/// refused push in `weir_pushes_refused_total` and logged.
#[derive(Debug)]
pub(crate) struct Pushed<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) run_id: &'a str,
    pub(crate) outcome: PushOutcome,
    pub(crate) lines: usize,
    pub(crate) detail: &'a str,
}

impl Pushed<'_> {
    pub(crate) fn emit(self) {
        let Self {
            tenant,
            run_id,
            lines,
            detail,
            ..
        } = self;
        let outcome = match self.outcome {
            PushOutcome::Accepted => "accepted",
            PushOutcome::DeadLettered => "dead_lettered",
            PushOutcome::Abandoned => "abandoned",
            PushOutcome::Refused(status) => {
                meters::push_refused(tenant, status);
                return tracing::info!(tenant, run_id, status, detail, "push refused");
            }
        };
        meters::pushed_lines(tenant, outcome, lines as u64);
        if self.outcome == PushOutcome::Abandoned {
            tracing::warn!(
                tenant,
                run_id,
                lines,
                detail,
                "pushed lines abandoned: the run stopped"
            );
        }
    }
}
