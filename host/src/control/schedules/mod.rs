//! Schedules on `weir serve`: a config submitted with a `[schedule]` (an
//! interval or a cron expression in a time zone, with jitter; read by
//! [`Schedule`], as `weir run --every` reads it) is kept, and the control
//! plane starts a run of it at each start, as a submission does.
//!
//! - **Only the plane that leads starts runs**: a plane is made once it
//!   leads its fleet (a standby makes none), and a plane that loses the
//!   lead exits.
//! - **Never two runs of one schedule at once**: a start that comes due
//!   while the schedule's last run goes on is skipped, and said so (a
//!   `ScheduleStart` event: a log line and `weir_scheduled_starts_total`,
//!   and `skipped`/`last_skip` in the API). So is one due longer ago than
//!   [`LATE_AFTER`] (the plane was down), one the tenant's
//!   `max_concurrent_runs` leaves no room for, and one that could not be
//!   written down first.
//! - **No start made twice**: before each start the schedule is written
//!   whole with its next start and the run it is about to start (in the
//!   store, and under a fleet on `<name>_schedules`, waiting for the
//!   cluster), so a restarted plane, or a standby that takes over, reads
//!   that the start was made. A start written but never made (the plane
//!   died in between) is lost, never made twice.
//! - Replacing a schedule's config (`PUT`) or deleting it stops what it
//!   would start; a run it started goes on (stop it as any run).

mod api;
mod due;
mod kept;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

pub(super) use api::{create_from, routes};
use kept::{Kept, Skip};

use super::{ApiError, ControlPlane, Principal, StartError};
use crate::config::ScheduleConfig;
use crate::core::problem::{Problem, Problems};
use crate::core::schedule::Schedule;
use crate::tenancy::operator::TenantPolicy;
use crate::tenancy::record::RunState;

/// How late a start may still be made; later, it is skipped and said so.
pub(super) const LATE_AFTER: Duration = Duration::from_secs(60);
/// How often the clock is read for starts that came due.
const TICK: Duration = Duration::from_millis(100);

/// The schedules this plane keeps, by id.
#[derive(Debug, Default)]
pub(super) struct Schedules {
    entries: Mutex<BTreeMap<String, Entry>>,
}

#[derive(Debug)]
struct Entry {
    kept: Kept,
    schedule: Schedule,
}

impl Schedules {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A schedule as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleView {
    pub id: String,
    pub tenant: String,
    /// In words: `every 1h`, `cron "0 * * * *" in Europe/Berlin, jitter up to 30s`.
    pub schedule: String,
    /// Its `[schedule]`, as submitted.
    pub settings: ScheduleConfig,
    pub created_ms: u64,
    /// The next start (jitter added), in milliseconds since the epoch and
    /// as RFC 3339; none when the schedule has no more.
    pub next_start_ms: Option<u64>,
    pub next_start: Option<String>,
    pub last_start_ms: Option<u64>,
    pub last_start: Option<String>,
    /// The run the last start made, and where it is.
    pub last_run: Option<LastRun>,
    /// Starts skipped so far, and the last skip: when, how many, why.
    pub skipped: u64,
    pub last_skip: Option<Skip>,
    /// Why the last start made no run, if it made none.
    pub last_error: Option<String>,
    /// The config, when one schedule is asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LastRun {
    pub id: String,
    /// `running`, ..., how it ended; `null` once it is no longer kept
    /// (or never started).
    pub status: Option<RunState>,
}

/// On a run's view: the schedule that started it, and its next start.
#[derive(Debug, Clone, Serialize)]
pub struct RunSchedule {
    pub id: String,
    pub next_start_ms: Option<u64>,
    pub next_start: Option<String>,
}

/// `ms` (since the epoch) as RFC 3339, to the millisecond.
fn shown(ms: u64) -> Option<String> {
    DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn ms(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_millis()).unwrap_or(0)
}

fn at(ms: u64) -> DateTime<Utc> {
    i64::try_from(ms)
        .ok()
        .and_then(DateTime::from_timestamp_millis)
        .unwrap_or_default()
}

/// Whether `text` (a submitted config) carries a `[schedule]`: read
/// before admission, to know what a submission makes.
pub(super) fn carries_schedule(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|table| table.contains_key("schedule"))
}

/// Read the clock and make the starts that came due, until the plane
/// stops (or is dropped).
pub(super) fn spawn_clock(plane: &Arc<ControlPlane>) -> std::io::Result<()> {
    let weak = Arc::downgrade(plane);
    std::thread::Builder::new()
        .name("weir-schedules".into())
        .spawn(move || {
            while let Some(plane) = weak.upgrade() {
                if plane.is_shutting_down() {
                    return;
                }
                plane.tick(Utc::now());
                drop(plane);
                // The clock a start is read on: not a synchronisation.
                std::thread::sleep(TICK);
            }
        })
        .map(drop)
}

impl ControlPlane {
    /// The schedules kept, read at start: under a fleet, those the last
    /// leader kept on Kafka (they are the truth: this plane's own store
    /// may be behind).
    pub(super) fn load_schedules(&self) -> Result<(), StartError> {
        kept::make_tables(&self.store)?;
        if let Some(fleet) = &self.fleet {
            let kept: Vec<Kept> = fleet
                .kept_schedules()?
                .into_iter()
                .filter_map(|(id, value)| match serde_json::from_slice(&value) {
                    Ok(kept) => Some(kept),
                    Err(e) => {
                        tracing::error!(schedule = %id, error = %e, "a kept schedule does not read: left out");
                        None
                    }
                })
                .collect();
            kept::replace_all(&self.store, &kept)?;
        }
        let mut entries = self.schedules.lock();
        for kept in kept::all(&self.store)? {
            match kept.schedule.schedule() {
                Ok(schedule) => {
                    entries.insert(kept.id.clone(), Entry { kept, schedule });
                }
                Err(problems) => {
                    tracing::error!(schedule = %kept.id, problems = ?problems, "a kept schedule no longer reads: it starts nothing");
                }
            }
        }
        if !entries.is_empty() {
            tracing::info!(schedules = entries.len(), "schedules read");
        }
        Ok(())
    }

    /// `text` of `tenant` as schedule `id`: admitted as a submission is,
    /// with a `[schedule]` that reads and a connector to run.
    fn admit_schedule(
        &self,
        tenant: &TenantPolicy,
        id: &str,
        text: &str,
    ) -> Result<(ScheduleConfig, Schedule), ApiError> {
        let config = super::start::admitted(&self.operator, tenant, id, text)?;
        let Some(settings) = config.schedule.clone() else {
            return Err(ApiError::Invalid(Problems::one(Problem::new(
                "schedule",
                "a schedule's config needs a [schedule]: `every` (an interval) or `cron`",
            ))));
        };
        if let Some(problem) = config.needs_a_source() {
            return Err(ApiError::Invalid(Problems::one(problem)));
        }
        let schedule = settings
            .schedule()
            .map_err(|problems| ApiError::Invalid(problems.into_iter().collect()))?;
        Ok((settings, schedule))
    }

    /// Keep `text` (a config with a `[schedule]`) of `who` as a schedule.
    /// Its first start is the schedule's first after now.
    pub fn create_schedule(&self, who: &Principal, text: &str) -> Result<ScheduleView, ApiError> {
        if self.is_shutting_down() {
            return Err(ApiError::ShuttingDown);
        }
        let tenant = self.tenant(who)?;
        let id = format!("s{}", crate::run::new_run_id());
        let (settings, schedule) = self.admit_schedule(tenant, &id, text)?;
        let mut entries = self.schedules.lock();
        let kept_now = entries
            .values()
            .filter(|e| e.kept.tenant == tenant.name)
            .count();
        if kept_now >= tenant.max_schedules {
            return Err(ApiError::TooManySchedules {
                tenant: tenant.name.clone(),
                max: tenant.max_schedules,
            });
        }
        let now = Utc::now();
        let due = schedule.next_after(now);
        let kept = Kept {
            id: id.clone(),
            tenant: tenant.name.clone(),
            config: text.to_owned(),
            schedule: settings,
            created_ms: ms(now),
            due_ms: due.map(ms),
            next_ms: due.map(|due| ms(schedule.jittered(due))),
            last_start_ms: None,
            last_run: None,
            skipped: 0,
            last_skip: None,
            last_error: None,
        };
        self.keep_schedule(&kept).map_err(ApiError::internal)?;
        tracing::info!(schedule = %id, tenant = %tenant.name, when = %schedule, next = ?kept.next_ms.and_then(shown), "schedule kept");
        let entry = Entry { kept, schedule };
        let view = self.schedule_view(&entry, true);
        entries.insert(id, entry);
        Ok(view)
    }

    /// Replace schedule `id`'s config with `text`: from now, it starts
    /// runs of that, on its schedule. Its last run, if going on, still
    /// counts: a start never overlaps it.
    pub fn replace_schedule(
        &self,
        who: &Principal,
        id: &str,
        text: &str,
    ) -> Result<ScheduleView, ApiError> {
        let tenant = self.tenant(who)?;
        if self
            .schedules
            .lock()
            .get(id)
            .is_none_or(|e| e.kept.tenant != tenant.name)
        {
            return Err(ApiError::NoSuchSchedule);
        }
        let (settings, schedule) = self.admit_schedule(tenant, id, text)?;
        let mut entries = self.schedules.lock();
        let Some(entry) = entries.get_mut(id) else {
            return Err(ApiError::NoSuchSchedule);
        };
        let due = schedule.next_after(Utc::now());
        let kept = Kept {
            config: text.to_owned(),
            schedule: settings,
            due_ms: due.map(ms),
            next_ms: due.map(|due| ms(schedule.jittered(due))),
            ..entry.kept.clone()
        };
        self.keep_schedule(&kept).map_err(ApiError::internal)?;
        tracing::info!(schedule = %id, tenant = %tenant.name, when = %schedule, "schedule replaced");
        *entry = Entry { kept, schedule };
        Ok(self.schedule_view(entry, true))
    }

    /// Delete schedule `id`: it starts nothing more (a run of it going on
    /// goes on). Its view as it was.
    pub fn delete_schedule(&self, who: &Principal, id: &str) -> Result<ScheduleView, ApiError> {
        let mut entries = self.schedules.lock();
        let Some(entry) = entries.get(id).filter(|e| who.sees(&e.kept.tenant)) else {
            return Err(ApiError::NoSuchSchedule);
        };
        if let Some(fleet) = &self.fleet {
            fleet.keep_schedule(id, None).map_err(ApiError::internal)?;
        }
        kept::remove(&self.store, id)?;
        let view = self.schedule_view(entry, false);
        tracing::info!(schedule = %id, tenant = %entry.kept.tenant, "schedule deleted");
        entries.remove(id);
        Ok(view)
    }

    /// The schedules `who` may see, oldest first.
    pub fn schedules(&self, who: &Principal) -> Vec<ScheduleView> {
        let entries = self.schedules.lock();
        let mut views: Vec<_> = entries
            .values()
            .filter(|e| who.sees(&e.kept.tenant))
            .map(|e| self.schedule_view(e, false))
            .collect();
        views.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        views
    }

    /// Schedule `id`, with its config, if `who` may see it.
    pub fn schedule(&self, who: &Principal, id: &str) -> Result<ScheduleView, ApiError> {
        let entries = self.schedules.lock();
        entries
            .get(id)
            .filter(|e| who.sees(&e.kept.tenant))
            .map(|e| self.schedule_view(e, true))
            .ok_or(ApiError::NoSuchSchedule)
    }

    /// The schedule that started run `run`, with its next start.
    pub(super) fn schedule_of_run(&self, run: &str) -> Option<RunSchedule> {
        let id = kept::schedule_of(&self.store, run).ok().flatten()?;
        let next = self.schedules.lock().get(&id).and_then(|e| e.kept.next_ms);
        Some(RunSchedule {
            id,
            next_start_ms: next,
            next_start: next.and_then(shown),
        })
    }

    fn schedule_view(&self, entry: &Entry, with_config: bool) -> ScheduleView {
        let kept = &entry.kept;
        let last_run = kept.last_run.as_ref().map(|id| LastRun {
            id: id.clone(),
            status: self.run_status(id),
        });
        ScheduleView {
            id: kept.id.clone(),
            tenant: kept.tenant.clone(),
            schedule: entry.schedule.to_string(),
            settings: kept.schedule.clone(),
            created_ms: kept.created_ms,
            next_start_ms: kept.next_ms,
            next_start: kept.next_ms.and_then(shown),
            last_start_ms: kept.last_start_ms,
            last_start: kept.last_start_ms.and_then(shown),
            last_run,
            skipped: kept.skipped,
            last_skip: kept.last_skip.clone(),
            last_error: kept.last_error.clone(),
            config: with_config.then(|| kept.config.clone()),
        }
    }

    /// Run `id`'s status: live here, or as stored.
    fn run_status(&self, id: &str) -> Option<RunState> {
        if let Some(run) = self.lock().runs.get(id) {
            return Some(run.status());
        }
        self.store
            .get(id)
            .ok()
            .flatten()
            .map(|record| record.status)
    }

    /// Whether run `id` is going on (here, or as the store says).
    fn going_on(&self, id: &str) -> bool {
        self.lock().runs.contains_key(id)
            || self
                .store
                .get(id)
                .ok()
                .flatten()
                .is_some_and(|r| r.status.is_active())
    }

    /// Write `kept` where this plane and the next read it: the store, and
    /// under a fleet `<name>_schedules` (waiting for the cluster).
    fn keep_schedule(&self, kept: &Kept) -> Result<(), String> {
        kept::put(&self.store, kept).map_err(|e| e.to_string())?;
        if let Some(fleet) = &self.fleet {
            let value = serde_json::to_vec(kept).map_err(|e| e.to_string())?;
            fleet.keep_schedule(&kept.id, Some(&value))?;
        }
        Ok(())
    }

    /// Make the starts that came due by `now`.
    pub(super) fn tick(self: &Arc<Self>, now: DateTime<Utc>) {
        let due: Vec<String> = self
            .schedules
            .lock()
            .values()
            .filter(|e| e.kept.next_ms.is_some_and(|next| next <= ms(now)))
            .map(|e| e.kept.id.clone())
            .collect();
        for id in due {
            self.start_due(&id, now);
        }
    }
}
