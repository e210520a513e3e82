//! What signals do to a `weir` process: SIGINT and SIGTERM stop it, SIGUSR1
//! pauses and SIGUSR2 resumes it, and a closed pipe ends a printing command.

use weir::run::{Pause, RunStatus, Runner};

/// Let a closed standard output end the process quietly, as it ends `cat`:
/// Rust ignores SIGPIPE, so `weir test ... | head` would otherwise panic on
/// its next write. Only for commands that print and end: serving processes
/// keep it ignored (their sockets report a closed peer as an error).
pub(super) fn end_quietly_on_a_closed_pipe() {
    // SAFETY: restoring a signal's default disposition has no preconditions;
    // it runs at start-up, before any thread that writes to a pipe.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// What SIGINT and SIGTERM do from now on in this process. The handler is
/// installed once; each command (a process may run several, e.g. in tests)
/// sets what it stops.
pub(super) fn on_signal(action: impl Fn() + Send + 'static) -> anyhow::Result<()> {
    type Action = Box<dyn Fn() + Send>;
    static ACTION: std::sync::Mutex<Option<Action>> = std::sync::Mutex::new(None);
    static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let lock = || {
        ACTION
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    *lock() = Some(Box::new(action));
    INSTALLED
        .get_or_init(|| {
            // SIGINT and SIGTERM only: SIGHUP reloads (see `reload`).
            use signal_hook::consts::{SIGINT, SIGTERM};
            let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
                .map_err(|e| e.to_string())?;
            std::thread::Builder::new()
                .name("weir-signals".into())
                .spawn(move || {
                    for _ in signals.forever() {
                        if let Some(action) = &*lock() {
                            action();
                        }
                    }
                })
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("cannot install the signal handler: {e}"))
}

/// What signals do to a run of `runner`: SIGINT/SIGTERM interrupt it (a
/// second one exits at once), SIGUSR1 pauses it and SIGUSR2 resumes it.
pub(super) fn control_by_signals(runner: &Runner) -> anyhow::Result<()> {
    let interrupt = runner.interrupter();
    on_signal(move || {
        if !interrupt.trigger() {
            eprintln!("interrupted again: stopping at once");
            std::process::exit(i32::from(RunStatus::Interrupted.exit_code()));
        }
    })?;
    on_pause_signals(runner.pauser())
}

/// SIGUSR1 pauses `pause`, SIGUSR2 resumes it, from now on in this process.
pub(super) fn on_pause_signals(pause: Pause) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGUSR1, SIGUSR2};
    let mut signals = signal_hook::iterator::Signals::new([SIGUSR1, SIGUSR2])
        .map_err(|e| anyhow::anyhow!("cannot install the pause signal handler: {e}"))?;
    std::thread::Builder::new()
        .name("weir-pause-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGUSR1 {
                    pause.pause();
                } else {
                    pause.resume();
                }
            }
        })?;
    Ok(())
}
