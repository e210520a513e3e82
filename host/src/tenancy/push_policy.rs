//! A tenant's bounds on documents it pushes to its runs (`weir serve`'s
//! `POST /api/runs/{id}/documents`), in its table of the operator's file:
//!
//! ```toml
//! [[tenants]]
//! push = { max_body_mib = 8, lines_per_second = 10000, burst = 20000, max_buffer = 100000 }
//! ```
//!
//! Each is a [`Limit`]: `PushBodyMib`, `PushLinesPerSecond` (with its
//! burst), `PushBuffer` (the most a run's `grants.push` buffer may hold,
//! checked at admission).

use serde::{Deserialize, Serialize};

use crate::core::limit::Limit;

/// `push` in a tenant's table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PushPolicy {
    /// The largest body of one push, in MiB (default 8, at most 256).
    #[serde(default = "PushPolicy::default_max_body_mib")]
    pub max_body_mib: u32,
    /// Lines pushed per second over all its runs (default 10,000).
    #[serde(default = "PushPolicy::default_lines_per_second")]
    pub lines_per_second: u32,
    /// Lines it may push at once before `lines_per_second` holds it
    /// (default twice `lines_per_second`); a push of more lines is refused.
    #[serde(default)]
    pub burst: Option<u32>,
    /// The most a run's `grants.push` buffer may hold (default 100,000).
    #[serde(default = "PushPolicy::default_max_buffer")]
    pub max_buffer: usize,
}

impl Default for PushPolicy {
    fn default() -> Self {
        Self {
            max_body_mib: Self::default_max_body_mib(),
            lines_per_second: Self::default_lines_per_second(),
            burst: None,
            max_buffer: Self::default_max_buffer(),
        }
    }
}

/// The largest `max_body_mib` there may be.
pub const MAX_BODY_MIB: u32 = 256;

impl PushPolicy {
    fn default_max_body_mib() -> u32 {
        8
    }
    fn default_lines_per_second() -> u32 {
        10_000
    }
    fn default_max_buffer() -> usize {
        100_000
    }

    /// The largest body, in bytes.
    pub fn max_body_bytes(&self) -> usize {
        usize::try_from(self.max_body_mib.min(MAX_BODY_MIB)).unwrap_or(usize::MAX) << 20
    }

    /// Lines at once.
    pub fn burst(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| self.lines_per_second.saturating_mul(2))
    }

    /// The problems of tenant `tenant`'s settings, each naming its key.
    pub(crate) fn problems(&self, tenant: &str, problems: &mut Vec<String>) {
        let at = |limit: Limit| format!("tenants.{tenant}.{}", limit.policy_key().unwrap_or(""));
        if !(1..=MAX_BODY_MIB).contains(&self.max_body_mib) {
            problems.push(format!(
                "{}: must be 1 to {MAX_BODY_MIB}",
                at(Limit::PushBodyMib)
            ));
        }
        if self.lines_per_second == 0 || self.burst() == 0 {
            problems.push(format!(
                "{}: must be at least 1 (and its burst too)",
                at(Limit::PushLinesPerSecond)
            ));
        }
        if !(1..=crate::plugin::PushGrant::MAX_BUFFER).contains(&self.max_buffer) {
            problems.push(format!(
                "{}: must be 1 to {}",
                at(Limit::PushBuffer),
                crate::plugin::PushGrant::MAX_BUFFER
            ));
        }
    }
}
