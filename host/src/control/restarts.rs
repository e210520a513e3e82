//! A continuous run's restarts as its run's thread keeps them and the API
//! shows them (`service.rs` starts its process again).

use std::sync::{Mutex, PoisonError};

/// What the API shows of a continuous run's restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServiceView {
    /// Its process was started again this many times.
    pub restarts: u32,
    /// How its last process that died ended.
    pub last_exit: Option<String>,
    /// When it died (milliseconds since the epoch).
    pub last_exit_ms: Option<u64>,
    /// While it waits to start again: when it will.
    pub next_start_ms: Option<u64>,
}

/// A continuous run's restarts, as its run's thread keeps them.
#[derive(Debug, Default)]
pub(super) struct Service(Mutex<ServiceView>);

impl Service {
    pub(super) fn view(&self) -> ServiceView {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether it is waiting to start again.
    pub(super) fn restarting(&self) -> bool {
        self.view().next_start_ms.is_some()
    }

    pub(super) fn update(&self, change: impl FnOnce(&mut ServiceView)) {
        change(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }
}
