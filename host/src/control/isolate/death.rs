//! A run's process as it ends: its log passed on to the server's with its
//! last lines kept, a stop that becomes a kill past its deadline, and how
//! it died, in words, for the run's record.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStderr};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::tenancy::process::{Pidfd, exit_text};

/// Lines of a run process's log kept to say why it died, and the most
/// bytes kept of each.
const LAST_WORDS: usize = 6;
const LAST_WORD_BYTES: usize = 512;

/// How a run's process ends: waited for once, killed past a stop's
/// deadline.
#[derive(Debug)]
pub(super) struct End {
    child: Mutex<Child>,
    /// Its log's last lines, for a death's record.
    last_words: Arc<Mutex<VecDeque<String>>>,
    /// The process itself, to kill.
    pidfd: Option<Pidfd>,
    /// Set once the process has ended and been waited for.
    ended: Arc<(Mutex<bool>, Condvar)>,
}

impl End {
    /// The end of `child` (its stdin and stdout taken), its log (`stderr`)
    /// passed on from now.
    pub(super) fn of(child: Child, stderr: Option<ChildStderr>) -> Self {
        let pidfd = Pidfd::of(child.id());
        let last_words = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = stderr {
            pass_on_log(stderr, Arc::clone(&last_words));
        }
        Self {
            child: Mutex::new(child),
            last_words,
            pidfd,
            ended: Arc::default(),
        }
    }

    /// Kill the process unless it has ended within `wait`.
    pub(super) fn kill_unless_ended_within(&self, wait: Duration) {
        let Some(pidfd) = self.pidfd.as_ref().and_then(Pidfd::try_clone) else {
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
                    pidfd.kill();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot watch a stopped run's process");
        }
    }

    /// How the process ended (waiting for it to), with its last log lines.
    pub(super) fn wait(&self) -> String {
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

/// Pass a run process's log on to the server's, keeping its last lines.
fn pass_on_log(stderr: ChildStderr, last: Arc<Mutex<VecDeque<String>>>) {
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
