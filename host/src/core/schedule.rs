//! When a config runs again: an interval (`30s`, `15m`, `1h`) or a cron
//! expression in a time zone, each start delayed by a random jitter. Used
//! by `weir run --every`; the control plane's schedules speak the same
//! type.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The longest interval, and the longest jitter: a year.
pub const LONGEST: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// The longest schedule text read; longer text is refused unread.
const LONGEST_TEXT: usize = 256;

/// How many missed starts are counted one by one (cron) before saying "at least".
const COUNTED: u64 = 10_000;

/// Why a schedule, a time zone or a jitter was refused: each names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("the schedule is empty: give an interval (`30s`, `15m`, `1h`) or a cron expression")]
    Empty,
    #[error("the {what} is {len} bytes long: at most {LONGEST_TEXT}")]
    TooLong { what: &'static str, len: usize },
    #[error("the interval {text:?} is zero: give a positive interval such as `30s`")]
    ZeroInterval { text: String },
    #[error("the interval {text:?} is longer than a year")]
    IntervalTooLong { text: String },
    #[error(
        "the schedule {text:?} is neither an interval (`30s`, `15m`, `1h`: {interval}) nor a cron expression ({cron})"
    )]
    Unreadable {
        text: String,
        interval: String,
        cron: String,
    },
    #[error("the cron expression {text:?} never matches a time")]
    NeverMatches { text: String },
    #[error("the time zone {zone:?} is not an IANA time zone (such as `Europe/Berlin` or `UTC`)")]
    UnknownZone { zone: String },
    #[error("a time zone is for a cron expression: the interval {text:?} takes none")]
    ZoneForInterval { text: String },
    #[error("the jitter {text:?} is not a duration (`10s`, `5m`): {reason}")]
    BadJitter { text: String, reason: String },
    #[error("the jitter {jitter:?} is not shorter than the interval {interval:?}")]
    JitterNotShorter { jitter: String, interval: String },
    #[error("the jitter {text:?} is longer than a year")]
    JitterTooLong { text: String },
}

/// How many of a cron's next starts its jitter is checked against.
const CRON_GAPS_CHECKED: usize = 500;

/// When a config runs: see the module's documentation.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
    text: String,
    jitter: Duration,
}

#[derive(Debug, Clone)]
enum Kind {
    Every(Duration),
    Cron {
        cron: Box<croner::Cron>,
        zone: chrono_tz::Tz,
    },
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Every(every) => write!(f, "every {}", humantime::format_duration(*every))?,
            Kind::Cron { zone, .. } => write!(f, "cron {:?} in {}", self.text, zone.name())?,
        }
        if !self.jitter.is_zero() {
            write!(
                f,
                ", jitter up to {}",
                humantime::format_duration(self.jitter)
            )?;
        }
        Ok(())
    }
}

fn checked_text<'a>(what: &'static str, text: &'a str) -> Result<&'a str, ScheduleError> {
    if text.len() > LONGEST_TEXT {
        return Err(ScheduleError::TooLong {
            what,
            len: text.len(),
        });
    }
    Ok(text.trim())
}

impl Schedule {
    /// Read `text` (an interval or a cron expression), the IANA time zone
    /// a cron expression runs in (default UTC) and the jitter (default none).
    pub fn parse(
        text: &str,
        zone: Option<&str>,
        jitter: Option<&str>,
    ) -> Result<Self, ScheduleError> {
        let text = checked_text("schedule", text)?;
        if text.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let zone = zone
            .map(|zone| {
                let zone = checked_text("time zone", zone)?;
                zone.parse::<chrono_tz::Tz>()
                    .map_err(|_| ScheduleError::UnknownZone {
                        zone: zone.to_owned(),
                    })
            })
            .transpose()?;
        let kind = match humantime::parse_duration(text) {
            Ok(every) if every.is_zero() => {
                return Err(ScheduleError::ZeroInterval { text: text.into() });
            }
            Ok(every) if every > LONGEST => {
                return Err(ScheduleError::IntervalTooLong { text: text.into() });
            }
            Ok(_) if zone.is_some() => {
                return Err(ScheduleError::ZoneForInterval { text: text.into() });
            }
            Ok(every) => Kind::Every(every),
            // One word (but a cron nickname such as `@daily`) is meant as an interval.
            Err(e) if !text.contains(char::is_whitespace) && !text.starts_with('@') => {
                let interval = e.to_string();
                return Err(if matches!(e, humantime::DurationError::NumberOverflow) {
                    ScheduleError::IntervalTooLong { text: text.into() }
                } else {
                    ScheduleError::Unreadable {
                        text: text.into(),
                        interval,
                        cron: "a cron expression has 5 or 6 fields".into(),
                    }
                });
            }
            Err(e) => match text.parse::<croner::Cron>() {
                Ok(cron) => Kind::Cron {
                    cron: Box::new(cron),
                    zone: zone.unwrap_or(chrono_tz::UTC),
                },
                Err(cron) => {
                    return Err(ScheduleError::Unreadable {
                        text: text.into(),
                        interval: e.to_string(),
                        cron: cron.to_string(),
                    });
                }
            },
        };
        let jitter = match jitter {
            None => Duration::ZERO,
            Some(given) => {
                let given = checked_text("jitter", given)?;
                let jitter = humantime::parse_duration(given).map_err(|e| {
                    if matches!(e, humantime::DurationError::NumberOverflow) {
                        ScheduleError::JitterTooLong { text: given.into() }
                    } else {
                        ScheduleError::BadJitter {
                            text: given.into(),
                            reason: e.to_string(),
                        }
                    }
                })?;
                if jitter > LONGEST {
                    return Err(ScheduleError::JitterTooLong { text: given.into() });
                }
                if let Kind::Every(every) = kind
                    && jitter >= every
                {
                    return Err(ScheduleError::JitterNotShorter {
                        jitter: given.into(),
                        interval: text.into(),
                    });
                }
                jitter
            }
        };
        let schedule = Self {
            kind,
            text: text.to_owned(),
            jitter,
        };
        // A cron expression that matches no time (`0 0 30 2 *`) is refused now, not at its first wait.
        if matches!(schedule.kind, Kind::Cron { .. }) && schedule.next_after(Utc::now()).is_none() {
            return Err(ScheduleError::NeverMatches {
                text: text.to_owned(),
            });
        }
        // A cron's jitter must be shorter than the gap between its starts
        // (its shortest over the next ones), as an interval's must: a start
        // delayed past the next would have that one taken for missed.
        if matches!(schedule.kind, Kind::Cron { .. })
            && !schedule.jitter.is_zero()
            && schedule
                .shortest_gap(CRON_GAPS_CHECKED)
                .is_some_and(|gap| schedule.jitter >= gap)
        {
            return Err(ScheduleError::JitterNotShorter {
                jitter: humantime::format_duration(schedule.jitter).to_string(),
                interval: text.to_owned(),
            });
        }
        Ok(schedule)
    }

    /// The shortest gap between two of the next `starts` starts (from now).
    fn shortest_gap(&self, starts: usize) -> Option<Duration> {
        let mut at = self.next_after(Utc::now())?;
        let mut shortest: Option<Duration> = None;
        for _ in 0..starts {
            let Some(next) = self.next_after(at) else {
                break;
            };
            let gap = (next - at).to_std().unwrap_or_default();
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            at = next;
        }
        shortest
    }

    /// The most a start is delayed by.
    pub fn jitter(&self) -> Duration {
        self.jitter
    }

    /// The first start strictly after `after`, without jitter; `None` when
    /// there is none (a cron expression that matches no time, or a time
    /// past what the calendar holds).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Every(every) => {
                after.checked_add_signed(chrono::TimeDelta::from_std(*every).ok()?)
            }
            Kind::Cron { cron, zone } => cron
                .find_next_occurrence(&after.with_timezone(zone), false)
                .ok()
                .map(|at| at.with_timezone(&Utc)),
        }
    }

    /// After a run scheduled at `due` ended at `now`: the next start
    /// (without jitter) and how many starts fell due while it ran and are
    /// skipped (runs never overlap). A cron's count stops at 10 000.
    pub fn following(
        &self,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<(DateTime<Utc>, u64)> {
        let mut next = self.next_after(due)?;
        if next > now {
            return Some((next, 0));
        }
        if let Kind::Every(every) = self.kind {
            // Arithmetic: however long the run took, no walk through the starts it missed.
            let late = (now - next).to_std().unwrap_or_default();
            let skipped = u64::try_from(late.as_nanos() / every.as_nanos())
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            let more = every.as_nanos().checked_mul(u128::from(skipped))?;
            let delta =
                chrono::TimeDelta::from_std(Duration::from_nanos(u64::try_from(more).ok()?))
                    .ok()?;
            return Some((next.checked_add_signed(delta)?, skipped));
        }
        let mut skipped = 0;
        while next <= now {
            skipped += 1;
            next = if skipped < COUNTED {
                self.next_after(next)?
            } else {
                self.next_after(now)?
            };
        }
        Some((next, skipped))
    }

    /// `at` delayed by a random share of the jitter.
    pub fn jittered(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        if self.jitter.is_zero() {
            return at;
        }
        let nanos = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        let delay = Duration::from_nanos(fastrand::u64(0..=nanos));
        chrono::TimeDelta::from_std(delay)
            .ok()
            .and_then(|delay| at.checked_add_signed(delay))
            .unwrap_or(at)
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
