//! Each submitted run in a process of its own, so that no tenant's run can
//! take the server (or another tenant's run) with it: an abort, a crash, an
//! allocation the machine refuses end that run's process only, and the
//! server records the run as failed, with why. The process is bounded by
//! the operating system: its writable memory (`RLIMIT_DATA`, so a run that
//! balloons fails its own allocations), no core files, and a session of its
//! own, so Linux's scheduler shares the CPU between runs rather than
//! between their threads. It never sees the server's environment (the
//! tenants' and the operator's tokens).
//!
//! The server admits a config before it starts a process (a refusal costs
//! no process); the process admits it again (its directory handles are its
//! own) and validates it, then runs it as a thread of `weir serve` would,
//! talking to the server over its stdin and stdout ([`protocol`]).

mod cgroup;
mod child;
mod protocol;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub use cgroup::TenantCpu;
pub use child::serve_run;
pub(crate) use protocol::FleetRun;
pub(in crate::control) use protocol::{FromRun, ToRun};

use super::ApiError;
use super::live::LiveRun;
use super::store::{RunRecord, now_ms};

/// Where a submitted run runs.
#[derive(Debug, Clone)]
pub enum Isolation {
    /// On a thread of the server's process: a run that aborts the process
    /// takes every run with it. For tests and for trusted tenants.
    Thread,
    /// In a process of its own.
    Process(RunProcess),
}

/// How to start a run's process: a `weir` binary, its global arguments
/// (the log format) before the hidden `serve-run` command, and the bound
/// on its writable memory.
#[derive(Debug, Clone)]
pub struct RunProcess {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub memory_mib: Option<u64>,
}

/// Variables a run's process keeps from the server's environment: where
/// caches and temporary files go, and what to log. Nothing else (the
/// tokens least of all).
const KEPT_VARIABLES: [&str; 6] = [
    "HOME",
    "XDG_CACHE_HOME",
    "TMPDIR",
    "RUST_LOG",
    "LANG",
    "PATH",
];

/// How much longer than its grace period a stopped run may take to end
/// before its process is killed.
const STOP_SLACK: Duration = Duration::from_secs(5);

/// Lines of a run process's log kept to say why it died, and the most
/// bytes kept of each.
const LAST_WORDS: usize = 6;
const LAST_WORD_BYTES: usize = 512;

/// A run going on in its own process.
#[derive(Debug)]
pub(in crate::control) struct Remote {
    stdin: Mutex<Option<ChildStdin>>,
    stdout: Mutex<Option<std::io::Lines<BufReader<ChildStdout>>>>,
    child: Mutex<Child>,
    /// Its log's last lines, for a death's record.
    last_words: Arc<Mutex<VecDeque<String>>>,
    /// Its metrics as it last reported them (Prometheus text).
    metrics: Mutex<String>,
    /// The process itself, to kill: a pidfd names this process and no
    /// other, even once it has ended and its pid is someone else's.
    pidfd: Option<std::os::fd::OwnedFd>,
    /// Set once the process has ended and been waited for.
    ended: Arc<(Mutex<bool>, std::sync::Condvar)>,
    /// How long a stopped run may take to end before its process is killed.
    stop_grace: Duration,
    /// Its open taps, by number: where what each takes goes.
    taps: Mutex<std::collections::HashMap<u64, tokio::sync::mpsc::Sender<serde_json::Value>>>,
    /// The number of its next tap or reload.
    next_number: std::sync::atomic::AtomicU64,
    /// Reloads asked of it and not yet answered, by number.
    reloads: Mutex<std::collections::HashMap<u64, std::sync::mpsc::Sender<ReloadAnswer>>>,
}

type ReloadAnswer = Result<crate::run::Reloaded, crate::control::reload::ReloadFailure>;

/// A tap open in a run's process; dropping it closes it there.
pub(in crate::control) struct RemoteTap {
    remote: Arc<Remote>,
    tap: u64,
}

impl Drop for RemoteTap {
    fn drop(&mut self) {
        self.remote
            .taps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.tap);
        self.remote.send(&ToRun::Untap { tap: self.tap });
    }
}

impl Remote {
    /// Start `start`'s run in a process of its own and wait until it is
    /// admitted and validated there (or refused, as for `tenant`).
    /// A stopped run that has not ended within `stop_grace` (its grace
    /// period) and [`STOP_SLACK`] more has its process killed. The process
    /// joins `cpu`, its tenant's control group, when the tenant has one.
    pub(in crate::control) fn start(
        process: &RunProcess,
        start: &ToRun,
        tenant: &str,
        stop_grace: Duration,
        cpu: Option<&TenantCpu>,
    ) -> Result<Arc<Self>, ApiError> {
        let mut child = spawn(process)
            .map_err(|e| ApiError::Internal(format!("cannot start the run's process: {e}")))?;
        // In its tenant's group before it starts a thread: it waits for its run.
        if let Some(Err(e)) = cpu.map(|group| group.add(child.id())) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ApiError::Internal(format!(
                "cannot hold the run's process to its tenant's cpus: {e}"
            )));
        }
        let pidfd = pidfd_of(child.id());
        let last_words = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            pass_on_log(stderr, Arc::clone(&last_words));
        }
        let remote = Arc::new(Self {
            stdin: Mutex::new(child.stdin.take()),
            stdout: Mutex::new(child.stdout.take().map(|o| BufReader::new(o).lines())),
            child: Mutex::new(child),
            last_words,
            metrics: Mutex::default(),
            pidfd,
            ended: Arc::default(),
            stop_grace: stop_grace.saturating_add(STOP_SLACK),
            taps: Mutex::default(),
            next_number: std::sync::atomic::AtomicU64::new(1),
            reloads: Mutex::default(),
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
                    | FromRun::Reloaded { .. },
                ) => {}
                Some(FromRun::Refused {
                    forbidden: true,
                    problems,
                }) => {
                    return Err(ApiError::Forbidden {
                        tenant: tenant.to_owned(),
                        problems,
                    });
                }
                Some(FromRun::Refused { problems, .. }) => return Err(ApiError::Invalid(problems)),
                Some(FromRun::Failed { error }) => return Err(ApiError::Internal(error)),
                Some(FromRun::Finished(_)) | None => {
                    let why = remote.death();
                    return Err(ApiError::Internal(format!(
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
            self.kill_unless_ended_within(self.stop_grace);
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
        filter: crate::telemetry::tap::TapFilter,
    ) -> (tokio::sync::mpsc::Receiver<serde_json::Value>, RemoteTap) {
        let tap = self.next_number.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        self.taps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tap, tx);
        self.send(&ToRun::Tap {
            tap,
            pipeline: filter.pipeline,
            stage: filter.stage,
            limit: filter.limit,
            percent: filter.percent,
        });
        (
            rx,
            RemoteTap {
                remote: Arc::clone(self),
                tap,
            },
        )
    }

    /// Reload the run in its process with `config` (of `tenant`), waiting
    /// for its answer (see [`crate::control::reload`]).
    pub(in crate::control) fn reload(
        &self,
        config: &str,
        tenant: &str,
    ) -> Result<crate::run::Reloaded, ApiError> {
        let reload = self.next_number.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        self.reloads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(reload, tx);
        self.send(&ToRun::Reload {
            reload,
            config: config.to_owned(),
        });
        let answer = rx.recv_timeout(crate::control::reload::ANSWER_WITHIN);
        self.reloads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&reload);
        match answer {
            Ok(outcome) => outcome.map_err(|failure| failure.into_error(tenant)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ApiError::Internal(
                "the run's process did not answer the reload in time: it may still take it up"
                    .into(),
            )),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err(ApiError::Ended("the run's process ended".into()))
            }
        }
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

    /// Mirror the run's counts into `live` until it ends; how it ended, or
    /// a failure saying how its process died.
    pub(in crate::control) fn wait(&self, live: &LiveRun) -> RunRecord {
        let mut finished = None;
        while let Some(message) = self.next() {
            match message {
                FromRun::Counts(counts) => {
                    let stats = &live.stats;
                    stats.published.store(counts.published, Ordering::Relaxed);
                    stats.processed.store(counts.processed, Ordering::Relaxed);
                    stats.indexed.store(counts.indexed, Ordering::Relaxed);
                    stats.failed.store(counts.failed, Ordering::Relaxed);
                    stats.dropped.store(counts.dropped, Ordering::Relaxed);
                }
                FromRun::Metrics { text } => {
                    *self.metrics.lock().unwrap_or_else(PoisonError::into_inner) = text;
                }
                FromRun::Tapped { tap, line } => {
                    let taps = self.taps.lock().unwrap_or_else(PoisonError::into_inner);
                    // A reader that is behind misses documents.
                    if let Some(tx) = taps.get(&tap) {
                        let _ = tx.try_send(line);
                    }
                }
                FromRun::TapEnded { tap } => {
                    self.taps
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&tap);
                }
                FromRun::Reloaded { reload, outcome } => {
                    let asked = self
                        .reloads
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&reload);
                    if let Some(asked) = asked {
                        let _ = asked.send(outcome);
                    }
                }
                FromRun::Finished(record) => finished = Some(*record),
                _ => {}
            }
        }
        // Its output is closed: the process is ending, or has ended. A
        // reload still waiting for its answer hears so now.
        self.reloads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let why = self.death();
        match finished {
            Some(record) => RunRecord {
                id: live.id.clone(),
                tenant: live.tenant.clone(),
                submitted_ms: live.submitted_ms,
                ..record
            },
            None => {
                tracing::error!(run_id = %live.id, why = %why, "a run's process died");
                RunRecord {
                    status: "failure".into(),
                    finished_ms: Some(now_ms()),
                    error: Some(format!("the run's process died: {why}")),
                    ..live.record()
                }
            }
        }
    }

    /// Its metrics as it last reported them.
    pub(in crate::control) fn metrics(&self) -> String {
        self.metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Kill the process unless it has ended within `wait`.
    fn kill_unless_ended_within(&self, wait: Duration) {
        let Some(pidfd) = self.pidfd.as_ref().and_then(|fd| fd.try_clone().ok()) else {
            return;
        };
        let ended = Arc::clone(&self.ended);
        let spawned = std::thread::Builder::new()
            .name("weir-run-stop".into())
            .spawn(move || {
                let (lock, signal) = &*ended;
                let done = lock.lock().unwrap_or_else(PoisonError::into_inner);
                let (done, _) = signal
                    .wait_timeout_while(done, wait, |done| !*done)
                    .unwrap_or_else(PoisonError::into_inner);
                if !*done {
                    tracing::error!(after = ?wait, "a stopped run did not end: its process is killed");
                    kill(&pidfd);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot watch a stopped run's process");
        }
    }

    /// How the process ended (waiting for it to), with its last log lines.
    fn death(&self) -> String {
        *self.stdin.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let status = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wait();
        {
            let (lock, signal) = &*self.ended;
            *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
            signal.notify_all();
        }
        let how = match status {
            Ok(status) => exit_text(status),
            Err(e) => format!("cannot wait for it: {e}"),
        };
        let words = self
            .last_words
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if words.is_empty() {
            how
        } else {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            format!("{how}; its log ended: {}", words.join(" | "))
        }
    }
}

/// The run's process: this binary's `serve-run`, with its own session,
/// its writable memory bounded, no core file, and none of the server's
/// environment but [`KEPT_VARIABLES`]. SIGTERM tells it when this process
/// ends, however it ends (see [`child`]).
fn spawn(process: &RunProcess) -> std::io::Result<Child> {
    spawn_bounded(process, "serve-run", Some(libc::SIGTERM))
}

/// Start `process`'s hidden `command` bounded as a run's process is: its
/// own session, no core files, its writable memory, none of this process's
/// environment but [`KEPT_VARIABLES`]; stdin, stdout and stderr piped.
/// With `death_signal` the kernel sends it that signal when this process
/// ends, however it ends (`kill -9` included).
pub(crate) fn spawn_bounded(
    process: &RunProcess,
    subcommand: &str,
    death_signal: Option<libc::c_int>,
) -> std::io::Result<Child> {
    let mut command = Command::new(&process.program);
    command
        .args(&process.args)
        .arg(subcommand)
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| KEPT_VARIABLES.iter().any(|v| k == v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let data_bytes = process.memory_mib.map(|mib| {
        libc::rlim_t::try_from(mib.saturating_mul(1 << 20)).unwrap_or(libc::RLIM_INFINITY)
    });
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: between fork and exec the closure calls only setsid, prctl,
    // getppid and setrlimit, which are async-signal-safe, and allocates
    // nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(signal) = death_signal {
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent ended before the signal was asked for: none
                // would come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            let limits = [
                Some((libc::RLIMIT_CORE, 0)),
                data_bytes.map(|bytes| (libc::RLIMIT_DATA, bytes)),
            ];
            for (resource, bytes) in limits.into_iter().flatten() {
                let limit = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    if death_signal.is_some() {
        spawn_from_a_lasting_thread(command)
    } else {
        command.spawn()
    }
}

/// Spawn `command` from a thread that lives as long as this process. The
/// kernel sends a child its `PR_SET_PDEATHSIG` signal when the *thread*
/// that forked it ends, not its process: forked from a request's thread or
/// a run's, which end any time, the child would be signalled then.
fn spawn_from_a_lasting_thread(command: Command) -> std::io::Result<Child> {
    type Job = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<std::sync::mpsc::Sender<Job>> = std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, received) = std::sync::mpsc::channel::<Job>();
        // Its receiver never disconnects (the sender is static): the thread
        // waits for jobs until the process ends. Should it not start, every
        // spawn says so below.
        let _ = std::thread::Builder::new()
            .name("weir-spawner".into())
            .spawn(move || {
                for (mut command, answer) in received {
                    let _ = answer.send(command.spawn());
                }
            });
        jobs
    });
    let gone = || std::io::Error::other("the thread that starts processes is gone");
    let (answer, answered) = std::sync::mpsc::channel();
    spawner.send((command, answer)).map_err(|_| gone())?;
    answered.recv().map_err(|_| gone())?
}

/// A pidfd for process `pid`, a child of this one not yet waited for.
fn pidfd_of(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // (or -1); the pid is a child not yet reaped, so it is this process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// SIGKILL the process `pidfd` names; one that has ended is not touched.
fn kill(pidfd: &std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: pidfd_send_signal with a valid pidfd, a signal, no info, no flags.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if sent != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot kill a run's process");
    }
}

/// Pass a run process's log on to the server's, keeping its last lines.
fn pass_on_log(stderr: std::process::ChildStderr, last: Arc<Mutex<VecDeque<String>>>) {
    let spawned = std::thread::Builder::new()
        .name("weir-run-log".into())
        .spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // Not `eprintln!`, which panics when this process's stderr
                // is closed: the run's log would then block on a full pipe.
                let _ = writeln!(std::io::stderr().lock(), "{line}");
                let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
                if last.len() == LAST_WORDS {
                    last.pop_front();
                }
                let line = line.trim();
                let kept = crate::core::text::cut_at(line, LAST_WORD_BYTES).unwrap_or(line);
                last.push_back(kept.to_owned());
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot pass on a run process's log");
    }
}

/// How a process ended, in words.
fn exit_text(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with status {code}"),
        (None, Some(signal)) => {
            let name = match signal {
                libc::SIGKILL => " (SIGKILL: killed, or out of memory)",
                libc::SIGABRT => " (SIGABRT: it aborted, e.g. an allocation failed)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGTERM => " (SIGTERM)",
                _ => "",
            };
            format!("it was killed by signal {signal}{name}")
        }
        (None, None) => "it ended".into(),
    }
}
