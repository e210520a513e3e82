//! Taps on `weir serve`'s runs: a run's documents as they leave a stage,
//! for its tenant only, bounded per tenant and per server (see `weir tap`).
//!
//! A tenant holds at most [`MAX_TAPS_PER_TENANT`] taps at once, and the
//! server [`MAX_TAPS`] over every tenant: one tenant holding all it may
//! leaves room for others, and is told its own bound, never the server's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{ApiError, ControlPlane, Principal};

/// Taps open at once on a control plane's runs, every tenant's together.
pub(super) const MAX_TAPS: usize = crate::telemetry::tap::MAX_TAPS;
/// Taps one tenant may have open at once.
pub(super) const MAX_TAPS_PER_TENANT: usize = 8;

/// The taps open on a control plane's runs, by who opened them (the
/// operator's are counted in the server's total only).
#[derive(Debug, Default)]
pub(super) struct TapCounts(Mutex<Counts>);

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    by_tenant: HashMap<String, usize>,
}

impl TapCounts {
    /// One more tap for `who`, or why not.
    fn take(self: &Arc<Self>, who: &Principal) -> Result<TapSlot, ApiError> {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let tenant = match who {
            Principal::Tenant(tenant) => Some(tenant.as_str()),
            Principal::Admin => None,
        };
        if let Some(tenant) = tenant
            && counts.by_tenant.get(tenant).copied().unwrap_or(0) >= MAX_TAPS_PER_TENANT
        {
            return Err(ApiError::TenantTaps {
                tenant: tenant.to_owned(),
                max: MAX_TAPS_PER_TENANT,
            });
        }
        if counts.total >= MAX_TAPS {
            return Err(ApiError::TooManyTaps { max: MAX_TAPS });
        }
        counts.total += 1;
        if let Some(tenant) = tenant {
            *counts.by_tenant.entry(tenant.to_owned()).or_default() += 1;
        }
        Ok(TapSlot {
            counts: Arc::clone(self),
            tenant: tenant.map(str::to_owned),
        })
    }

    /// Taps open: in all, and `tenant`'s.
    #[cfg(test)]
    fn open(&self, tenant: &str) -> (usize, usize) {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (
            counts.total,
            counts.by_tenant.get(tenant).copied().unwrap_or(0),
        )
    }
}

/// One of a control plane's open taps, counted while it lives.
pub(super) struct TapSlot {
    counts: Arc<TapCounts>,
    tenant: Option<String>,
}

impl Drop for TapSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(tenant) = &self.tenant
            && let Some(n) = counts.by_tenant.get_mut(tenant)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_tenant.remove(tenant);
            }
        }
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
        let slot = self.taps.take(who)?;
        Ok(match &run.remote() {
            Some(remote) => {
                // The run's process holds its runner: its names are checked
                // here, from the config it runs, before the tap is asked for.
                let text = self.store.config_of(id)?;
                let config = text.as_deref().and_then(|text| {
                    let nothing = std::iter::empty();
                    crate::config::Config::parse(text, std::path::Path::new("."), nothing).ok()
                });
                if let Some(names) = config.as_ref().map(crate::run::tap_names) {
                    names.check(&filter).map_err(ApiError::Tap)?;
                }
                let (rx, held) = remote.tap(filter);
                tap::stream(rx, (held, slot), limit, duration)
            }
            None => {
                let local = run
                    .local
                    .as_ref()
                    .ok_or_else(|| ApiError::internal("the run has nothing to tap"))?;
                let (rx, guard) = local.0.taps().open(filter).map_err(ApiError::Tap)?;
                tap::stream(rx, (guard, slot), limit, duration)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> Principal {
        Principal::Tenant(name.into())
    }

    #[test]
    fn a_tenant_at_its_bound_leaves_room_for_the_others() {
        let counts = Arc::new(TapCounts::default());
        let acme: Vec<TapSlot> = (0..MAX_TAPS_PER_TENANT)
            .map(|_| counts.take(&tenant("acme")).expect("within acme's bound"))
            .collect();
        match counts.take(&tenant("acme")) {
            Err(ApiError::TenantTaps { tenant, max }) => {
                assert_eq!((tenant.as_str(), max), ("acme", MAX_TAPS_PER_TENANT));
            }
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("acme went past its bound"),
        }
        let zeta = counts
            .take(&tenant("zeta"))
            .expect("zeta is not refused for acme");
        assert_eq!(
            counts.open("acme"),
            (MAX_TAPS_PER_TENANT + 1, MAX_TAPS_PER_TENANT)
        );
        drop(acme);
        assert_eq!(
            counts.open("acme"),
            (1, 0),
            "closed taps give their room back"
        );
        drop(zeta);
        // The server's bound holds over every tenant and the operator.
        let mut all = Vec::new();
        for n in 0..MAX_TAPS {
            let who = if n % 2 == 0 {
                Principal::Admin
            } else {
                tenant(&format!("t{n}"))
            };
            all.push(counts.take(&who).expect("within the server's bound"));
        }
        assert!(matches!(
            counts.take(&tenant("late")),
            Err(ApiError::TooManyTaps { .. })
        ));
        const { assert!(MAX_TAPS > MAX_TAPS_PER_TENANT) };
    }
}
