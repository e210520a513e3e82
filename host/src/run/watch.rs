//! Watching a connector's run: progress, stalls, who serves the pipeline,
//! a graceful interrupt, and the throughput lines.

use std::time::{Duration, Instant};

use super::accounting::Accounting;
use crate::config::RunnerConfig;
use crate::messenger::{PublisherMessenger, Seen, Servers};
use crate::plugin::Cancel;
use crate::telemetry::{self, RunStats, StatsSnapshot};

/// How long the runner waits when no event is waiting. It bounds how late
/// completion is noticed, not throughput: events queue up meanwhile.
const EVENT_POLL: Duration = Duration::from_millis(10);
/// How often the runner reads heartbeats.
const SERVER_CHECK: Duration = Duration::from_secs(1);
/// How many pending ids a stalled or interrupted run names.
const NAMED_IDS: usize = 10;

/// Wait for events when none was waiting, up to [`EVENT_POLL`]; how many
/// were counted. While the connector runs the runner sleeps (woken early by
/// the connector's end): blocking on the queue instead would wake it once
/// per event. Once it has returned (`tail`), only what is in flight is left
/// and the run ends when its last event is counted: the runner waits on
/// the queue itself and is woken by the first event.
pub(super) fn wait_for_events(
    publisher: &dyn PublisherMessenger,
    accounting: &Accounting,
    tail: bool,
) -> Result<usize, crate::messenger::MessengerError> {
    if !tail {
        std::thread::park_timeout(EVENT_POLL);
        return Ok(0);
    }
    Ok(match publisher.poll_event(EVENT_POLL)? {
        crate::messenger::Polled::Item(event) => {
            accounting.apply(&event);
            1
        }
        crate::messenger::Polled::Idle => 0,
        crate::messenger::Polled::Closed => {
            // Nobody left to send one: the other checks end the run.
            std::thread::park_timeout(EVENT_POLL);
            0
        }
    })
}

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
    /// The processes that served the pipeline recently, and since when
    /// the runner reaches the cluster they come through (Kafka mode).
    servers: Servers,
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
            servers: Servers::Unknown,
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
    /// or indexer for `runner.liveness_timeout`. In Kafka mode both count
    /// only time the runner could reach the cluster: while it cannot,
    /// nobody's silence means anything, and once it can again both windows
    /// start afresh.
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
            if let Servers::Heard { since, seen } = &self.servers {
                // Busy processes (on this run's documents or an earlier
                // run's still queued ahead of them) are progress too.
                let served: u64 = seen
                    .iter()
                    .map(|s| s.heartbeat.processed + s.heartbeat.indexed)
                    .sum();
                if served > self.served {
                    self.last_progress = now;
                }
                self.served = served;
                // Back from an outage: the stall window starts again.
                self.last_progress = self.last_progress.max(*since);
            }
        }
        if accounting.pending() == 0 {
            self.last_progress = now;
            self.unserved_since = None;
            return None;
        }
        if self.servers == Servers::Unreachable {
            // Time away from the cluster is no time stalled.
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
        let Servers::Heard { since: reached, .. } = self.servers else {
            // Not known (local mode): nobody is blamed.
            self.unserved_since = None;
            return None;
        };
        let (missing, silent) = self.unserved()?;
        // Silent since the last heartbeat of a process of the missing part,
        // or, when none was ever heard, since the part was first found
        // missing; never since before the runner reached the cluster.
        let since = (*self.unserved_since.get_or_insert(now)).max(reached);
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
    /// been silent (stopped, or heard from last that long ago, counted from
    /// when the runner reached the cluster at the earliest; `None` when no
    /// such process was ever heard from); `None` when every part is served
    /// (or in local mode).
    fn unserved(&mut self) -> Option<(&'static str, Option<Duration>)> {
        let Servers::Heard {
            since,
            seen: servers,
        } = &self.servers
        else {
            return None;
        };
        // How long `s` has been silent while the runner could have heard it.
        let silence = |s: &Seen| s.received.max(*since).elapsed();
        let live = |s: &&Seen| s.heartbeat.serving && silence(s) <= self.config.liveness_timeout;
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
        let silent = servers.iter().filter(|s| of_role(s)).map(silence).min();
        Some((missing, silent))
    }

    fn stall_report(&self, why: &str, accounting: &Accounting) -> String {
        let mut report = format!("{why}{}", pending_suffix(accounting));
        if let Servers::Heard { seen: servers, .. } = &self.servers {
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
        crate::messenger::ServerRole::Hybrid => "hybrid",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::document::Document;
    use crate::core::event::Event;
    use crate::messenger::{Heartbeat, MessengerError, Polled, ServerRole};

    /// A publisher whose view of the cluster the test sets.
    struct Cluster(std::sync::Mutex<Servers>);

    impl PublisherMessenger for Cluster {
        fn send_for_processing(
            &self,
            _: Document,
            _: Duration,
        ) -> Result<Option<Document>, MessengerError> {
            Ok(None)
        }
        fn poll_event(&self, _: Duration) -> Result<Polled<Event>, MessengerError> {
            Ok(Polled::Idle)
        }
        fn servers(&self) -> Servers {
            self.0.lock().expect("lock").clone()
        }
    }

    fn worker(ago: Duration) -> Seen {
        Seen {
            heartbeat: Heartbeat {
                process: "w:1:1".into(),
                role: ServerRole::Hybrid,
                serving: true,
                time_ms: 0,
                processed: 7,
                indexed: 7,
            },
            received: Instant::now() - ago,
        }
    }

    const MINUTE: Duration = Duration::from_secs(60);

    /// A watch with one document pending, its windows 30 s and 2 min, and
    /// the last progress (and its last look at the cluster) long ago.
    fn pending_watch<'a>(config: &'a RunnerConfig, stats: &'a RunStats) -> (Watch<'a>, Accounting) {
        let accounting = Accounting::new("run");
        accounting.published("doc-1");
        let mut watch = Watch::new(config, "books", stats);
        watch.last_progress = Instant::now() - 10 * MINUTE;
        (watch, accounting)
    }

    fn config() -> RunnerConfig {
        RunnerConfig {
            liveness_timeout: Duration::from_secs(30),
            stall_timeout: 2 * MINUTE,
            ..RunnerConfig::default()
        }
    }

    #[test]
    fn nothing_is_stalled_while_the_cluster_is_out_of_reach() {
        let (config, stats) = (config(), RunStats::default());
        let (mut watch, accounting) = pending_watch(&config, &stats);
        let cluster = Cluster(std::sync::Mutex::new(Servers::Unreachable));
        assert_eq!(watch.stalled(&cluster, &accounting), None);
        // Back: silent for minutes, but only reachable for a moment.
        *cluster.0.lock().expect("lock") = Servers::Heard {
            since: Instant::now(),
            seen: vec![worker(5 * MINUTE)],
        };
        watch.last_server_check = None;
        assert_eq!(watch.stalled(&cluster, &accounting), None);
    }

    #[test]
    fn silence_counts_from_when_the_cluster_was_reached() {
        let (config, stats) = (config(), RunStats::default());
        let (mut watch, accounting) = pending_watch(&config, &stats);
        watch.served = 14;
        let cluster = Cluster(std::sync::Mutex::new(Servers::Heard {
            since: Instant::now() - MINUTE,
            seen: vec![worker(5 * MINUTE)],
        }));
        // Reached a minute ago; the worker silent since before: a minute.
        let stalled = watch.stalled(&cluster, &accounting).expect("stalled");
        assert!(
            stalled.contains("no live worker or indexer") && stalled.contains("for 60s"),
            "{stalled}"
        );
    }

    #[test]
    fn the_stall_window_starts_again_when_the_cluster_is_back() {
        let (config, stats) = (config(), RunStats::default());
        let (mut watch, accounting) = pending_watch(&config, &stats);
        watch.served = 14;
        // Every part served, nothing finished for 10 min, but the cluster
        // was reached 10 s ago: not stalled.
        let cluster = Cluster(std::sync::Mutex::new(Servers::Heard {
            since: Instant::now() - Duration::from_secs(10),
            seen: vec![worker(Duration::ZERO)],
        }));
        assert_eq!(watch.stalled(&cluster, &accounting), None);
        // Reached for 3 min, nothing finished: stalled.
        let (mut watch, accounting) = pending_watch(&config, &stats);
        watch.served = 14;
        *cluster.0.lock().expect("lock") = Servers::Heard {
            since: Instant::now() - 3 * MINUTE,
            seen: vec![worker(Duration::ZERO)],
        };
        let stalled = watch.stalled(&cluster, &accounting).expect("stalled");
        assert!(stalled.contains("no document finished"), "{stalled}");
    }
}
