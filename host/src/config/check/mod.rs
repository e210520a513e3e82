//! Every structural problem of a config (names, references, numbers,
//! files), all at once, one concern per file. Plugin configs are checked by
//! the plugins themselves, later (the runner's validation).

use super::{Config, Problem};

pub use bounds::MAX_DURATION;

pub(crate) mod bounds;
mod conditions;
mod counts;
mod kafka;
pub(crate) mod names;
mod plugins;
mod tenants;
#[cfg(test)]
mod tests;
mod timeouts;

/// Where the checks put what they find.
type Found = Vec<Problem>;

impl Config {
    /// Every structural problem (names, references, numbers, files), all at
    /// once. Plugin configs are checked by the plugins themselves, later.
    pub fn check(&self) -> Vec<Problem> {
        let mut found = Found::new();
        timeouts::check(self, &mut found);
        names::check(self, &mut found);
        counts::check(self, &mut found);
        bounds::check(self, &mut found);
        found.extend(self.cache.problems());
        found.extend(
            self.schedule
                .iter()
                .flat_map(super::ScheduleConfig::problems),
        );
        if self.schedule.is_some()
            && let Some(why) = super::schedule::unschedulable(&self.connectors)
        {
            found.push(Problem::new("schedule", why));
        }
        conditions::check(self, &mut found);
        if let Some(kafka) = &self.kafka {
            kafka::check(kafka, &mut found);
        }
        plugins::check_instances(self, &mut found);
        tenants::check(self, &mut found);
        plugins::check_files_and_limits(self, &mut found);
        found
    }
}
