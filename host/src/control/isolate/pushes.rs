//! The pushes sent to one run's process and not yet answered, by number.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

use crate::source::push::{Answer, PushRefused};

/// How a push came out, as the run's process answers it.
pub(in crate::control) type Pushed = Result<Answer, PushRefused>;

/// The pushes a run's process has not answered yet.
#[derive(Debug, Default)]
pub(super) struct Pushes {
    sent: Mutex<HashMap<u64, oneshot::Sender<Pushed>>>,
    next: AtomicU64,
}

impl Pushes {
    /// A new push's number, and where its answer arrives (closed without
    /// one if the process ends first).
    pub(super) fn send(&self) -> (u64, oneshot::Receiver<Pushed>) {
        let push = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        self.lock().insert(push, tx);
        (push, rx)
    }

    /// Push `push` came out as `answer`.
    pub(super) fn answer(&self, push: u64, answer: Pushed) {
        if let Some(sent) = self.lock().remove(&push) {
            let _ = sent.send(answer);
        }
    }

    /// Push `push` is no longer waited for.
    pub(super) fn forget(&self, push: u64) {
        self.lock().remove(&push);
    }

    /// The process is ending: every push still waiting hears so.
    pub(super) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Pushed>>> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
