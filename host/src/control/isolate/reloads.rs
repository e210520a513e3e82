//! The reloads asked of one run's process and not yet answered, by
//! number, and why one has no answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Mutex, PoisonError};

use crate::run::Reloaded;
use crate::tenancy::process::protocol::Failure;

/// How a reload came out, as the run's process answers it.
pub(super) type Answer = Result<Reloaded, Failure>;

/// Why a reload asked of a run's process was not done.
#[derive(Debug)]
pub(in crate::control) enum ReloadError {
    /// The process answered that it did not reload.
    Failed(Failure),
    /// It did not answer in time (it may still take the config up).
    Late,
    /// It ended before it answered.
    Gone,
}

/// The reloads a run's process has not answered yet.
#[derive(Debug, Default)]
pub(super) struct Reloads {
    asked: Mutex<HashMap<u64, Sender<Answer>>>,
    next: AtomicU64,
}

impl Reloads {
    /// A new reload's number, and where its answer arrives.
    pub(super) fn ask(&self) -> (u64, Receiver<Answer>) {
        let reload = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = std::sync::mpsc::channel();
        self.lock().insert(reload, tx);
        (reload, rx)
    }

    /// Reload `reload` came out as `answer`.
    pub(super) fn answer(&self, reload: u64, answer: Answer) {
        if let Some(asked) = self.lock().remove(&reload) {
            let _ = asked.send(answer);
        }
    }

    /// Reload `reload` is no longer waited for.
    pub(super) fn forget(&self, reload: u64) {
        self.lock().remove(&reload);
    }

    /// The process is ending: every reload still waiting hears so.
    pub(super) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Sender<Answer>>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
