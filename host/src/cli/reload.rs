//! When a running process reloads its config: on SIGHUP, and with
//! `--watch` when the config file or a stage plugin changes on disk.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use weir::run::Runner;

/// How often `--watch` looks at the files. A change is taken up once the
/// files have stayed as they are for one look, so a plugin being copied
/// in is not read half-written.
const WATCH_EVERY: Duration = Duration::from_millis(500);

/// Run `body` while SIGHUP (and, with `watch`, a change to `path` or a
/// stage plugin) reloads `runner` from `path`.
pub(super) fn reloading<T>(
    runner: &Runner,
    path: &Path,
    watch: bool,
    body: impl FnOnce() -> T,
) -> anyhow::Result<T> {
    let files = || {
        std::iter::once(path.to_owned())
            .chain(runner.stage_files())
            .collect()
    };
    let reload = || {
        // Refusals and outcomes are logged by the reload.
        let _ = runner.reload_file(path);
    };
    on_change(&path.display().to_string(), files, reload, watch, body)
}

/// Run `body` while SIGHUP (and, with `watch`, a settled change to one of
/// `files()`) calls `reload`; `what` names what is reloaded, in the log.
pub(super) fn on_change<T>(
    what: &str,
    files: impl Fn() -> Vec<PathBuf> + Sync,
    reload: impl Fn() + Sync,
    watch: bool,
    body: impl FnOnce() -> T,
) -> anyhow::Result<T> {
    let (wake, hangups) = hangups()?;
    let stamps = &|| stamps(files());
    let reload = &reload;
    Ok(std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("weir-reload".into())
            .spawn_scoped(scope, move || {
                let mut seen = watch.then(stamps);
                let mut settling = false;
                loop {
                    // Without `--watch` nothing is looked at: the thread
                    // sleeps until a SIGHUP or the end of the body.
                    let next = match seen {
                        Some(_) => hangups.recv_timeout(WATCH_EVERY),
                        None => hangups
                            .recv()
                            .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                    };
                    let asked = match next {
                        Ok(Wake::Hangup) => {
                            tracing::info!(config = %what, "SIGHUP: reloading");
                            true
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => false,
                        Ok(Wake::Done) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    };
                    let changed = seen.as_mut().is_some_and(|seen| {
                        let now = stamps();
                        let moved = now != *seen;
                        *seen = now;
                        // Changed at the last look and still since: settled.
                        let settled = settling && !moved;
                        settling = moved;
                        settled
                    });
                    if changed {
                        tracing::info!(config = %what, "a watched file changed: reloading");
                    }
                    if asked || changed {
                        // SIGHUPs sent until now are answered by this reload;
                        // one sent while it runs brings another.
                        while let Ok(Wake::Hangup) = hangups.try_recv() {}
                        reload();
                        if let Some(seen) = seen.as_mut() {
                            *seen = stamps();
                        }
                    }
                }
            })
            .expect("the OS refused to start a thread");
        let out = body();
        // The thread wakes now, not at its next look.
        let _ = wake.send(Wake::Done);
        out
    }))
}

/// What wakes the reload thread.
enum Wake {
    /// A SIGHUP: reload.
    Hangup,
    /// The body is over: end.
    Done,
}

/// Each watched file with its size and modification time (none when it
/// cannot be read).
type Seen = Vec<(PathBuf, Option<(u64, SystemTime)>)>;

fn stamps(files: Vec<PathBuf>) -> Seen {
    files
        .into_iter()
        .map(|file| {
            let stamp = std::fs::metadata(&file)
                .ok()
                .and_then(|m| Some((m.len(), m.modified().ok()?)));
            (file, stamp)
        })
        .collect()
}

/// SIGHUPs as they arrive, from now on in this process, and a sender that
/// wakes their receiver; a process that runs several commands (tests) gets
/// them in the newest.
fn hangups() -> anyhow::Result<(mpsc::Sender<Wake>, mpsc::Receiver<Wake>)> {
    use signal_hook::consts::SIGHUP;
    type Sender = std::sync::Mutex<Option<mpsc::Sender<Wake>>>;
    static SENDER: Sender = std::sync::Mutex::new(None);
    static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let (tx, rx) = mpsc::channel();
    *SENDER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tx.clone());
    INSTALLED
        .get_or_init(|| {
            let mut signals =
                signal_hook::iterator::Signals::new([SIGHUP]).map_err(|e| e.to_string())?;
            std::thread::Builder::new()
                .name("weir-hangups".into())
                .spawn(move || {
                    for _ in signals.forever() {
                        if let Some(tx) = &*SENDER
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                        {
                            let _ = tx.send(Wake::Hangup);
                        }
                    }
                })
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("cannot install the SIGHUP handler: {e}"))?;
    Ok((tx, rx))
}
