//! Taps on `weir serve`'s runs: a run's documents as they leave a stage,
//! for its tenant only, bounded per server (see `weir tap`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{ApiError, ControlPlane, Principal};

/// Taps open at once on a control plane's runs.
const MAX_TAPS: usize = 16;

/// One of a control plane's open taps, counted while it lives.
struct TapSlot(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for TapSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ControlPlane {
    /// Tap run `id`'s documents for `who` (its tenant or the operator) as
    /// `query` says: a stream of JSON lines, of this run only whatever the
    /// query names.
    pub fn tap(
        &self,
        who: &Principal,
        id: &str,
        query: &crate::telemetry::tap::TapQuery,
    ) -> Result<axum::response::Response, ApiError> {
        use crate::telemetry::tap;
        let run = self.live_run(who, id)?;
        if self.fleet.is_some() {
            return Err(ApiError::BadRequest(
                "a fleet's runs are processed by its workers: tap a fleet worker's pipeline process instead".into(),
            ));
        }
        let mut filter = query.filter().map_err(ApiError::BadRequest)?;
        let duration = query.duration().map_err(ApiError::BadRequest)?;
        filter.run_id = Some(id.to_owned());
        let limit = filter.limit;
        if self.taps.fetch_add(1, Ordering::AcqRel) >= MAX_TAPS {
            self.taps.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::TooManyTaps { max: MAX_TAPS });
        }
        let slot = TapSlot(Arc::clone(&self.taps));
        Ok(match &run.remote {
            Some(remote) => {
                let (rx, held) = remote.tap(filter);
                tap::stream(rx, (held, slot), limit, duration)
            }
            None => {
                let (rx, guard) =
                    tap::open(filter).ok_or(ApiError::TooManyTaps { max: tap::MAX_TAPS })?;
                tap::stream(rx, (guard, slot), limit, duration)
            }
        })
    }
}
