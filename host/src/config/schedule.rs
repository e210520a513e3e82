//! `[schedule]`: when a config runs again by itself, as
//! [`Schedule`](crate::core::schedule::Schedule) reads it.
//!
//! ```toml
//! [schedule]
//! every = "1h"               # or: cron = "0 * * * *"
//! time_zone = "Europe/Berlin" # a cron expression's (default UTC)
//! jitter = "30s"              # each start delayed by up to this
//! ```
//!
//! `weir run` runs such a config again and again (as `--every`, which
//! overrides it); a config submitted to `weir serve` with one is kept as a
//! schedule the leading control plane starts runs of.

use serde::{Deserialize, Serialize};

use crate::core::problem::Problem;
use crate::core::schedule::{Schedule, ScheduleError};

/// `[schedule]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    /// An interval: `30s`, `15m`, `1h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// A cron expression (5 or 6 fields, or a nickname such as `@daily`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The IANA time zone a cron expression runs in (default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Each start delayed by a random time up to this (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
}

impl ScheduleConfig {
    /// The schedule these settings say, or every problem with where it is.
    pub fn schedule(&self) -> Result<Schedule, Vec<Problem>> {
        let (key, text) = match (&self.every, &self.cron) {
            (Some(_), Some(_)) => {
                return Err(vec![Problem::new(
                    "schedule",
                    "give `every` (an interval) or `cron` (a cron expression), not both",
                )]);
            }
            (None, None) => {
                return Err(vec![Problem::new(
                    "schedule",
                    "give `every` (an interval such as `1h`) or `cron` (such as `0 * * * *`)",
                )]);
            }
            (Some(every), None) => ("every", every),
            (None, Some(cron)) => ("cron", cron),
        };
        if key == "every" && self.time_zone.is_some() {
            return Err(vec![Problem::new(
                "schedule.time_zone",
                "a time zone is for `cron`: an interval (`every`) takes none",
            )]);
        }
        Schedule::parse(text, self.time_zone.as_deref(), self.jitter.as_deref()).map_err(|e| {
            let at = match e {
                ScheduleError::UnknownZone { .. } => "schedule.time_zone".to_owned(),
                ScheduleError::BadJitter { .. }
                | ScheduleError::JitterNotShorter { .. }
                | ScheduleError::JitterTooLong { .. } => "schedule.jitter".to_owned(),
                ScheduleError::TooLong { what, .. } => match what {
                    "time zone" => "schedule.time_zone".to_owned(),
                    "jitter" => "schedule.jitter".to_owned(),
                    _ => format!("schedule.{key}"),
                },
                _ => format!("schedule.{key}"),
            };
            vec![Problem::new(at, e.to_string())]
        })
    }

    /// Every problem of these settings (none when they make a schedule).
    pub fn problems(&self) -> Vec<Problem> {
        self.schedule().err().unwrap_or_default()
    }
}

/// Why a config whose connector never ends cannot run on a schedule (its
/// first run would never end, so every later start would be skipped), for
/// `[schedule]` and `weir run --every` alike; none when every connector
/// ends.
pub fn unschedulable(connectors: &[super::ConnectorConfig]) -> Option<String> {
    let names: Vec<String> = connectors
        .iter()
        .filter(|c| c.never_ends())
        .map(|c| format!("`{}`", c.name))
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "connector {} never ends (`continuous`, or a source that never ends granted): a \
             run of it on a schedule would never end, and every later start would be skipped; \
             run it once instead (`weir serve` starts it again when its process dies)",
            names.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        let config: ScheduleConfig = toml::from_str(text).expect("shape");
        config.problems().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn each_wrong_schedule_is_refused_where_it_is_wrong() {
        assert_eq!(
            problems("every = \"1h\"\njitter = \"5m\""),
            Vec::<String>::new()
        );
        assert_eq!(
            problems("cron = \"0 * * * *\"\ntime_zone = \"Europe/Berlin\""),
            Vec::<String>::new()
        );
        for (text, at, says) in [
            ("", "schedule", "give `every`"),
            (
                "every = \"1h\"\ncron = \"0 * * * *\"",
                "schedule",
                "not both",
            ),
            ("every = \"0s\"", "schedule.every", "zero"),
            ("every = \"soon\"", "schedule.every", "neither an interval"),
            ("cron = \"0 0 30 2 *\"", "schedule.cron", "never matches"),
            ("cron = \"* *\"", "schedule.cron", "cron"),
            (
                "cron = \"0 * * * *\"\ntime_zone = \"Mars/Olympus\"",
                "schedule.time_zone",
                "IANA",
            ),
            (
                "every = \"1h\"\ntime_zone = \"UTC\"",
                "schedule.time_zone",
                "takes none",
            ),
            (
                "every = \"1m\"\njitter = \"1m\"",
                "schedule.jitter",
                "not shorter",
            ),
            (
                "every = \"1m\"\njitter = \"lots\"",
                "schedule.jitter",
                "not a duration",
            ),
        ] {
            let found = problems(text);
            assert_eq!(found.len(), 1, "{text}: {found:?}");
            assert!(
                found[0].starts_with(at) && found[0].contains(says),
                "{text}: {found:?}"
            );
        }
    }
}
