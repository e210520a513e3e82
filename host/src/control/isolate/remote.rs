//! [`Remote`]: the server's handle on one run's process, speaking the run
//! process protocol over its stdin and stdout. It starts the process and
//! waits for its run to start, tells it controls, and reads what it says
//! until it ends: counts into the run's live stats, metrics kept for
//! `/metrics`, taps' documents to their readers ([`super::taps`]), reloads'
//! answers to their askers ([`super::reloads`]), and how the run ended, or
//! how its process died ([`super::death`]).

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{ChildStdin, ChildStdout};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::death::End;
use super::pushes::{Pushed, Pushes};
use super::reloads::{ReloadError, Reloads};
use super::taps::Taps;
use crate::run::Reloaded;
use crate::telemetry::RunStats;
use crate::telemetry::tap::TapFilter;
use crate::tenancy::process::protocol::{self, Failure, FromRun, ToRun};
use crate::tenancy::process::{RunProcess, TenantCpu, spawn_bounded};
use crate::tenancy::record::RunRecord;

/// How much longer than its grace period a stopped run may take to end
/// before its process is killed.
const STOP_SLACK: Duration = Duration::from_secs(5);

/// How long the server waits for a run's process to answer a reload: the
/// reload waits up to 30 s for workers to switch, validation comes first.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// A run going on in its own process.
#[derive(Debug)]
pub(in crate::control) struct Remote {
    stdin: Mutex<Option<ChildStdin>>,
    stdout: Mutex<Option<Lines<BufReader<ChildStdout>>>>,
    end: End,
    /// How long a stopped run may take to end before its process is killed.
    stop_grace: Duration,
    /// Its metrics as it last reported them (Prometheus text).
    metrics: Mutex<String>,
    taps: Taps,
    reloads: Reloads,
    pushes: Pushes,
}

/// A tap open in a run's process; dropping it closes it there.
pub(in crate::control) struct RemoteTap {
    remote: Arc<Remote>,
    tap: u64,
}

impl Drop for RemoteTap {
    fn drop(&mut self) {
        self.remote.taps.close(self.tap);
        self.remote.send(&ToRun::Untap { tap: self.tap });
    }
}

impl Remote {
    /// Start `start`'s run in a process of its own and wait until it is
    /// admitted and validated there (or why not). A stopped run that has
    /// not ended within `stop_grace` (its grace period) and [`STOP_SLACK`]
    /// more has its process killed. The process joins `cpu`, its tenant's
    /// control group, when the tenant has one.
    pub(in crate::control) fn start(
        process: &RunProcess,
        start: &ToRun,
        stop_grace: Duration,
        cpu: Option<&TenantCpu>,
    ) -> Result<Arc<Self>, Failure> {
        // SIGTERM tells it when this process ends, however it ends (see
        // `control/run_process.rs`).
        let mut child = spawn_bounded(process, "serve-run", Some(libc::SIGTERM))
            .map_err(|e| Failure::Failed(format!("cannot start the run's process: {e}")))?;
        // In its tenant's group before it starts a thread: it waits for its run.
        if let Some(Err(e)) = cpu.map(|group| group.add(child.id())) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failure::Failed(format!(
                "cannot hold the run's process to its tenant's cpus: {e}"
            )));
        }
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(|o| BufReader::new(o).lines());
        let stderr = child.stderr.take();
        let remote = Arc::new(Self {
            stdin: Mutex::new(stdin),
            stdout: Mutex::new(stdout),
            end: End::of(child, stderr),
            stop_grace: stop_grace.saturating_add(STOP_SLACK),
            metrics: Mutex::default(),
            taps: Taps::default(),
            reloads: Reloads::default(),
            pushes: Pushes::default(),
        });
        remote.send(start);
        loop {
            match remote.next() {
                Some(FromRun::Started) => return Ok(remote),
                Some(
                    FromRun::Counts(_)
                    | FromRun::Metrics { .. }
                    | FromRun::Tapped { .. }
                    | FromRun::TapEnded { .. }
                    | FromRun::Reloaded { .. }
                    | FromRun::Pushed { .. },
                ) => {}
                Some(FromRun::NotStarted(failure)) => return Err(failure),
                Some(FromRun::Finished(_)) | None => {
                    let why = remote.death();
                    return Err(Failure::Failed(format!(
                        "the run's process ended before its run started: {why}"
                    )));
                }
            }
        }
    }

    /// Tell the process `message`; a process that is gone hears nothing
    /// (its end is read from its output). A stop is also a deadline: a
    /// process wedged past it (a run that cannot end) is killed.
    pub(in crate::control) fn send(&self, message: &ToRun) {
        if matches!(message, ToRun::Stop) {
            self.end.kill_unless_ended_within(self.stop_grace);
        }
        let mut stdin = self.stdin.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pipe) = stdin.as_mut()
            && pipe
                .write_all(protocol::line(message).as_bytes())
                .and_then(|()| pipe.flush())
                .is_err()
        {
            *stdin = None;
        }
    }

    /// Open a tap in the run's process: what it takes arrives on the
    /// receiver until the process says it has its limit.
    pub(in crate::control) fn tap(
        self: &Arc<Self>,
        filter: TapFilter,
    ) -> (tokio::sync::mpsc::Receiver<serde_json::Value>, RemoteTap) {
        let (tap, rx) = self.taps.open();
        self.send(&ToRun::Tap {
            tap,
            pipeline: filter.pipeline,
            stage: filter.stage,
            limit: filter.limit,
            percent: filter.percent,
        });
        let held = RemoteTap {
            remote: Arc::clone(self),
            tap,
        };
        (rx, held)
    }

    /// Reload the run in its process with `config`, waiting for its answer
    /// (see `control/reload.rs`).
    pub(in crate::control) fn reload(&self, config: &str) -> Result<Reloaded, ReloadError> {
        let (reload, answered) = self.reloads.ask();
        self.send(&ToRun::Reload {
            reload,
            config: config.to_owned(),
        });
        let answer = answered.recv_timeout(ANSWER_WITHIN);
        self.reloads.forget(reload);
        match answer {
            Ok(outcome) => outcome.map_err(ReloadError::Failed),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ReloadError::Late),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(ReloadError::Gone),
        }
    }

    /// Push `lines` to the run's push source `source` (its only one for
    /// `None`); its answer arrives on the receiver (closed without one if
    /// the process ends first). `forget` it if no longer waited for.
    pub(in crate::control) fn push(
        &self,
        source: Option<String>,
        lines: Vec<crate::source::push::Line>,
    ) -> (u64, tokio::sync::oneshot::Receiver<Pushed>) {
        let (push, answered) = self.pushes.send();
        self.send(&ToRun::Push {
            push,
            source,
            lines,
        });
        (push, answered)
    }

    /// Push `push` is no longer waited for (its asker went away).
    pub(in crate::control) fn forget_push(&self, push: u64) {
        self.pushes.forget(push);
    }

    /// The process's next message; `None` once its output ends.
    fn next(&self) -> Option<FromRun> {
        let mut stdout = self.stdout.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let line = stdout.as_mut()?.next()?.ok()?;
            match serde_json::from_str(&line) {
                Ok(message) => return Some(message),
                Err(e) => tracing::warn!(error = %e, "a run's process said what is not a message"),
            }
        }
    }

    /// Mirror the run's counts into `stats` until it ends; how it ended,
    /// or (`Err`) how its process died.
    pub(in crate::control) fn wait(&self, stats: &RunStats) -> Result<RunRecord, String> {
        self.wait_over(stats, crate::tenancy::record::Counts::default())
    }

    /// [`Self::wait`], its counts mirrored over `before` (those of a
    /// continuous run's processes that died).
    pub(in crate::control) fn wait_over(
        &self,
        stats: &RunStats,
        before: crate::tenancy::record::Counts,
    ) -> Result<RunRecord, String> {
        let mut finished = None;
        while let Some(message) = self.next() {
            match message {
                FromRun::Counts(counts) => counts.plus(before).mirror_into(stats),
                FromRun::Metrics { text } => {
                    *self.metrics.lock().unwrap_or_else(PoisonError::into_inner) = text;
                }
                FromRun::Tapped { tap, line } => self.taps.took(tap, line),
                FromRun::TapEnded { tap } => self.taps.close(tap),
                FromRun::Reloaded { reload, outcome } => self.reloads.answer(reload, outcome),
                FromRun::Pushed { push, outcome } => self.pushes.answer(push, outcome),
                FromRun::Finished(record) => finished = Some(*record),
                FromRun::Started | FromRun::NotStarted(_) => {}
            }
        }
        // Its output is closed: the process is ending, or has ended. A
        // reload still waiting for its answer hears so now.
        self.reloads.clear();
        self.pushes.clear();
        let why = self.death();
        finished.ok_or(why)
    }

    /// Its metrics as it last reported them.
    pub(in crate::control) fn metrics(&self) -> String {
        self.metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How the process ended (its stdin closed, waiting for it to).
    fn death(&self) -> String {
        *self.stdin.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.end.wait()
    }
}
