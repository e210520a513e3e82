//! Starting a tenant's process bounded: its own session, no core files,
//! its writable memory (`RLIMIT_DATA`), none of this process's environment
//! but [`KEPT_VARIABLES`], and (for a run's process) a signal from the
//! kernel when its server ends, however it ends.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use super::RunProcess;

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
