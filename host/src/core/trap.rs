//! Why a plugin instance trapped: the cause a failed call reports, and the
//! bounded labels the metrics count it by.

use std::time::Duration;

use super::limit::{Limit, LimitHit};

/// What made an instance trap.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrapCause {
    /// The call ran past its deadline and was interrupted.
    #[error("exceeded its call deadline of {0:?} and was interrupted")]
    Deadline(Duration),
    /// A connector's `execute` ran past its own deadline
    /// (`limits.execute_timeout`) and was interrupted.
    #[error(
        "exceeded its execute deadline of {0:?} ({key}) and was interrupted",
        key = Limit::ExecuteTimeout
    )]
    ExecuteDeadline(Duration),
    /// The instance tried to grow its linear memory past its cap (which
    /// the documents it holds in the host share).
    #[error(
        "exceeded its memory limit of {limit_mib} MiB (tried to grow its linear memory to {wanted_bytes} bytes)"
    )]
    MemoryLimit { limit_mib: u64, wanted_bytes: usize },
    /// The guest panicked or aborted; the message is what it printed last.
    #[error("panicked: {0}")]
    Panic(String),
    /// A host call refused to go past one of the plugin's limits.
    #[error("hit a limit: {0}")]
    Limit(LimitHit),
    /// Host code panicked while serving the plugin: a bug in Weir, but it
    /// fails only this call, never the worker.
    #[error("made the host fail (a bug in Weir, please report it): {0}")]
    HostPanic(String),
    /// The call was stopped from outside: the run is stopping.
    #[error("was stopped: the run is stopping")]
    Cancelled,
    /// Any other trap (out-of-bounds access, stack overflow, invalid handle, ...).
    #[error("trapped: {0}")]
    Other(String),
}

impl TrapCause {
    /// A short, bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Deadline(_) | Self::ExecuteDeadline(_) => "deadline",
            Self::MemoryLimit { .. } => "memory_limit",
            Self::Panic(_) => "panic",
            Self::Limit(_) => "limit",
            Self::HostPanic(_) => "host_panic",
            Self::Cancelled => "cancelled",
            Self::Other(_) => "trap",
        }
    }

    /// The limit that stopped the call, if one did.
    pub fn limit(&self) -> Option<Limit> {
        match self {
            Self::Deadline(_) => Some(Limit::CallTimeout),
            Self::ExecuteDeadline(_) => Some(Limit::ExecuteTimeout),
            Self::MemoryLimit { .. } => Some(Limit::MemoryMib),
            Self::Limit(hit) => Some(hit.limit),
            _ => None,
        }
    }
}
