//! A continuous connector's run (`continuous = true`, or a streaming
//! connector): it never ends by itself, so no deadline cuts it (unless
//! its `limits.execute_timeout` is set), and it reports what it has done
//! every `runner.report_every` instead of only at its end.

use std::time::{Duration, Instant};

use super::accounting::Accounting;
use crate::config::{ConnectorConfig, RunnerConfig};
use crate::telemetry::events::ConnectorReported;

use super::deliveries::NO_DEADLINE;

/// The deadlines of connector `c`'s run: the runner's own (its
/// `connector_timeout`), and its `execute`'s. A continuous one has none
/// but the execute limit set for it (by its config or its tenant's).
pub(super) fn deadlines(
    c: &ConnectorConfig,
    runner: &RunnerConfig,
    continuous: bool,
) -> (Duration, Duration) {
    if continuous {
        let execute = c.plugin.limits.execute_timeout.unwrap_or(NO_DEADLINE);
        // The call's deadline names the execute limit: a second before the
        // runner's own check.
        (execute.saturating_add(Duration::from_secs(1)), execute)
    } else {
        let timeout = runner.connector_timeout;
        let execute = c
            .plugin
            .limits
            .execute_timeout()
            .min(timeout.saturating_add(Duration::from_secs(1)));
        (timeout, execute)
    }
}

/// The counts at the last report.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    published: u64,
    indexed: u64,
}

/// A continuous connector's reports, one every `runner.report_every`.
#[derive(Debug)]
pub(super) struct Reports<'a> {
    connector: &'a str,
    pipeline: &'a str,
    every: Duration,
    started: Instant,
    last: (Instant, Seen),
}

impl<'a> Reports<'a> {
    /// The reports of `c` (none for a connector that ends by itself).
    pub(super) fn of(
        c: &'a ConnectorConfig,
        runner: &RunnerConfig,
        continuous: bool,
    ) -> Option<Self> {
        continuous.then(|| {
            let now = Instant::now();
            Self {
                connector: &c.name,
                pipeline: &c.pipeline,
                every: runner.report_every,
                started: now,
                last: (now, Seen::default()),
            }
        })
    }

    /// Report when a period has passed since the last report.
    pub(super) fn tick(&mut self, accounting: &Accounting) {
        let now = Instant::now();
        let period = now - self.last.0;
        if period < self.every {
            return;
        }
        let seen = Seen {
            published: Accounting::get(&accounting.published),
            indexed: Accounting::get(&accounting.succeeded),
        };
        let holding = accounting.holding();
        let secs = period.as_secs_f64().max(1e-9);
        ConnectorReported {
            connector: self.connector,
            pipeline: self.pipeline,
            running: now - self.started,
            published: seen.published,
            indexed: seen.indexed,
            failed: Accounting::get(&accounting.failed),
            dropped: Accounting::get(&accounting.dropped),
            pending: holding.pending,
            duplicates: holding.duplicates,
            published_per_second: seen.published.saturating_sub(self.last.1.published) as f64
                / secs,
            indexed_per_second: seen.indexed.saturating_sub(self.last.1.indexed) as f64 / secs,
            held_aside: holding.aside.early + holding.aside.creates + holding.aside.waiting,
        }
        .emit();
        self.last = (now, seen);
    }
}
