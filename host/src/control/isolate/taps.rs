//! The taps open in one run's process, by number: where what each takes
//! goes, until the process says it took its limit or its reader goes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc::{Receiver, Sender};

/// Documents a tap's reader may be behind before it misses some.
const TAP_BUFFER: usize = 64;

/// A run process's open taps.
#[derive(Debug, Default)]
pub(super) struct Taps {
    open: Mutex<HashMap<u64, Sender<serde_json::Value>>>,
    next: AtomicU64,
}

impl Taps {
    /// A new tap's number, and where what it takes arrives.
    pub(super) fn open(&self) -> (u64, Receiver<serde_json::Value>) {
        let tap = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = tokio::sync::mpsc::channel(TAP_BUFFER);
        self.lock().insert(tap, tx);
        (tap, rx)
    }

    /// A document tap `tap` took; a reader that is behind misses it.
    pub(super) fn took(&self, tap: u64, line: serde_json::Value) {
        if let Some(tx) = self.lock().get(&tap) {
            let _ = tx.try_send(line);
        }
    }

    /// Tap `tap` is closed: nothing more comes of it.
    pub(super) fn close(&self, tap: u64) {
        self.lock().remove(&tap);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Sender<serde_json::Value>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
