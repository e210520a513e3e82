//! What `/metrics` shows of runs in processes of their own: each live
//! run's metrics as its process last reported them, merged with this
//! process's, and the totals of those that ended, kept until idle for the
//! operator's `metrics_idle_timeout`.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::telemetry::merge::{Merged, Take};

/// The metrics of runs that ran in processes of their own, summed.
#[derive(Debug, Default)]
pub(super) struct RunMetrics {
    finished: Mutex<Merged>,
}

impl RunMetrics {
    /// Add what a run that ran in its own process counted, as it ended.
    pub(super) fn keep_totals(&self, text: &str) {
        self.lock().add(text, Take::Totals);
    }

    /// This process's metrics (`own`) with the live runs' (`live`, as
    /// each last reported them) and the totals of those that ended (until
    /// idle for `idle`).
    pub(super) fn render(
        &self,
        own: &str,
        live: impl IntoIterator<Item = String>,
        idle: Duration,
    ) -> String {
        let mut now = Merged::default();
        now.add(own, Take::Everything);
        for text in live {
            now.add(&text, Take::Everything);
        }
        let mut kept = self.lock();
        kept.expire(idle);
        kept.with(&now).render()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Merged> {
        self.finished.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
