//! Watching a connector's run: progress, stalls, who serves the pipeline,
//! a graceful interrupt, and the throughput lines.

use std::time::{Duration, Instant};

use super::publisher::Accounting;
use crate::config::RunnerConfig;
use crate::messenger::{PublisherMessenger, Seen};
use crate::plugin::Cancel;
use crate::telemetry::{self, RunStats, StatsSnapshot};

/// How often the runner reads heartbeats.
const SERVER_CHECK: Duration = Duration::from_secs(1);
/// How many pending ids a stalled or interrupted run names.
const NAMED_IDS: usize = 10;

/// The state of one connector's wait.
pub(super) struct Watch<'a> {
    config: &'a RunnerConfig,
    pipeline: &'a str,
    stats: &'a RunStats,
    pub(super) started: Instant,
    /// The last time an event arrived, or nothing was pending.
    last_progress: Instant,
    /// Since when nobody serves part of the pipeline (Kafka mode).
    unserved_since: Option<Instant>,
    last_server_check: Option<Instant>,
    /// The processes that served the pipeline recently (Kafka mode).
    servers: Option<Vec<Seen>>,
    /// Documents they had processed and indexed, all told, at the last look.
    served: u64,
    interrupted_at: Option<Instant>,
    last_log: (Instant, StatsSnapshot),
}

impl<'a> Watch<'a> {
    pub(super) fn new(config: &'a RunnerConfig, pipeline: &'a str, stats: &'a RunStats) -> Self {
        let now = Instant::now();
        Self {
            config,
            pipeline,
            stats,
            started: now,
            last_progress: now,
            unserved_since: None,
            last_server_check: None,
            servers: None,
            served: 0,
            interrupted_at: None,
            last_log: (now, stats.snapshot()),
        }
    }

    /// Events arrived.
    pub(super) fn progressed(&mut self) {
        self.last_progress = Instant::now();
    }

    /// Workers and indexers are other processes: the live counts come from
    /// the events, so that progress lines and bars tell the truth.
    pub(super) fn count_remote(&self, accounting: &Accounting) {
        use std::sync::atomic::Ordering::Relaxed;
        let succeeded = Accounting::get(&accounting.succeeded);
        let failed = Accounting::get(&accounting.failed);
        let dropped = Accounting::get(&accounting.dropped);
        self.stats.indexed.store(succeeded, Relaxed);
        self.stats.failed.store(failed, Relaxed);
        self.stats.dropped.store(dropped, Relaxed);
        self.stats
            .processed
            .store(succeeded + failed + dropped, Relaxed);
    }

    /// Whether an interrupt was seen (the connector was stopped).
    pub(super) fn was_interrupted(&self) -> bool {
        self.interrupted_at.is_some()
    }

    /// The run was interrupted: stop the connector (the first time), and
    /// say whether waiting is over (nothing pending, or the grace period
    /// passed).
    pub(super) fn interrupted(&mut self, connector: &Cancel, pending: usize) -> bool {
        let grace = self.config.grace_period;
        let at = *self.interrupted_at.get_or_insert_with(|| {
            tracing::warn!(
                pending,
                ?grace,
                "interrupted: the connector stops; waiting for documents in flight (interrupt again to stop at once)"
            );
            connector.cancel();
            Instant::now()
        });
        pending == 0 || at.elapsed() >= grace
    }

    /// Why the run has stalled, if it has: documents pending and none
    /// finishing for `runner.stall_timeout`, or (Kafka mode) no live worker
    /// or indexer for `runner.liveness_timeout`.
    pub(super) fn stalled(
        &mut self,
        publisher: &dyn PublisherMessenger,
        accounting: &Accounting,
    ) -> Option<String> {
        let now = Instant::now();
        if self
            .last_server_check
            .is_none_or(|t| now - t >= SERVER_CHECK)
        {
            self.last_server_check = Some(now);
            self.servers = publisher.servers();
            // Busy processes (on this run's documents or an earlier run's
            // still queued ahead of them) are progress too.
            let served: u64 = self
                .servers
                .iter()
                .flatten()
                .map(|s| s.heartbeat.processed + s.heartbeat.indexed)
                .sum();
            if served > self.served {
                self.last_progress = now;
            }
            self.served = served;
        }
        if accounting.pending() == 0 {
            self.last_progress = now;
            self.unserved_since = None;
            return None;
        }
        let stall = self.config.stall_timeout;
        if now - self.last_progress >= stall {
            return Some(self.stall_report(
                &format!("stalled: no document finished for {stall:?}"),
                accounting,
            ));
        }
        if self.servers.is_none() {
            // Not known (or the cluster is unreachable): nobody is blamed.
            self.unserved_since = None;
            return None;
        }
        let (missing, silent) = self.unserved()?;
        // Silent since the last heartbeat of a process of the missing part,
        // or, when none was ever heard, since the part was first found missing.
        let since = *self.unserved_since.get_or_insert(now);
        let silent = silent.unwrap_or(now - since);
        let liveness = self.config.liveness_timeout;
        (silent >= liveness).then(|| {
            self.stall_report(
                &format!(
                    "stalled: no live {missing} serves pipeline `{}` (none heard from for {:.0?})",
                    self.pipeline,
                    Duration::from_secs(silent.as_secs())
                ),
                accounting,
            )
        })
    }

    /// What part of the pipeline has no live process, where processes
    /// announce themselves, and how long the last process of that part has
    /// been silent (stopped, or heard from last that long ago; `None` when
    /// no such process was ever heard from); `None` when every part is
    /// served (or in local mode).
    fn unserved(&mut self) -> Option<(&'static str, Option<Duration>)> {
        let servers = self.servers.as_ref()?;
        let live =
            |s: &&Seen| s.heartbeat.serving && s.received.elapsed() <= self.config.liveness_timeout;
        let processes = servers
            .iter()
            .filter(live)
            .any(|s| s.heartbeat.role.processes());
        let indexes = servers
            .iter()
            .filter(live)
            .any(|s| s.heartbeat.role.indexes());
        let (missing, of_role): (_, fn(&Seen) -> bool) = match (processes, indexes) {
            (true, true) => {
                self.unserved_since = None;
                return None;
            }
            (false, true) => ("worker", |s| s.heartbeat.role.processes()),
            (true, false) => ("indexer", |s| s.heartbeat.role.indexes()),
            (false, false) => ("worker or indexer", |_| true),
        };
        let silent = servers
            .iter()
            .filter(|s| of_role(s))
            .map(|s| s.received.elapsed())
            .min();
        Some((missing, silent))
    }

    fn stall_report(&self, why: &str, accounting: &Accounting) -> String {
        let mut report = format!("{why}{}", pending_suffix(accounting));
        if let Some(servers) = &self.servers {
            if servers.is_empty() {
                report.push_str("; no worker or indexer has announced itself for this pipeline");
            } else {
                let seen: Vec<String> = servers
                    .iter()
                    .map(|s| {
                        let h = &s.heartbeat;
                        format!(
                            "{} {} last heard {:.1?} ago ({}, {} processed, {} indexed)",
                            role_name(h),
                            h.process,
                            s.received.elapsed(),
                            if h.serving { "serving" } else { "stopped" },
                            h.processed,
                            h.indexed
                        )
                    })
                    .collect();
                report.push_str(&format!("; processes seen: {}", seen.join("; ")));
            }
        }
        report
    }

    /// Log throughput lines every `runner.log_interval`.
    pub(super) fn log_throughput(&mut self, pending: usize) {
        if self.last_log.0.elapsed() < self.config.log_interval {
            return;
        }
        let now = (Instant::now(), self.stats.snapshot());
        for line in
            telemetry::throughput_lines(&self.last_log.1, &now.1, now.0 - self.last_log.0, pending)
        {
            tracing::info!("{line}");
        }
        self.last_log = now;
    }
}

fn role_name(h: &crate::messenger::Heartbeat) -> &'static str {
    match h.role {
        crate::messenger::ServerRole::Worker => "worker",
        crate::messenger::ServerRole::Indexer => "indexer",
        crate::messenger::ServerRole::WorkerIndexer => "worker-indexer",
    }
}

/// ` with N documents pending (first: a, b, ...)`, or nothing.
pub(super) fn pending_suffix(accounting: &Accounting) -> String {
    let (ids, all) = accounting.pending_ids(NAMED_IDS);
    if all == 0 {
        return String::new();
    }
    let more = if all > ids.len() { ", ..." } else { "" };
    format!(
        " with {all} document{} pending (first: {}{more})",
        if all == 1 { "" } else { "s" },
        ids.join(", ")
    )
}
