//! The processes tenants' work runs in, and their bounds: a submitted run
//! in a process of its own (`weir serve-run`), a fleet's pipeline in one
//! (`weir fleet-pipeline`). Each is started bounded ([`spawn_bounded`]: its
//! own session, no core files, its writable memory, none of the server's
//! environment), may join its tenant's control group ([`TenantCpu`]), is
//! named by a [`Pidfd`] to kill, and speaks the run process [`protocol`].

mod cgroup;
mod pidfd;
pub mod protocol;
mod spawn;

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

pub use cgroup::TenantCpu;
pub use pidfd::Pidfd;
pub(crate) use spawn::spawn_bounded;

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

/// How a process ended, in words.
pub fn exit_text(status: ExitStatus) -> String {
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
