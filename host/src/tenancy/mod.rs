//! What a tenant is and may do, below the control plane (`weir serve`)
//! and the fleet (`weir fleet`) that both serve tenants: the operator's
//! file ([`operator`]), admission of a tenant's config ([`admit`]), the
//! specs a fleet serves ([`spec`]), a run as it is kept and told
//! ([`record`]: its [`RunState`], counts and record), the one refusal of
//! a tenant's config ([`refusal`]), the sync a config keeps state for when
//! it names none (`sync_id.rs`), and the processes runs and fleet pipelines
//! run in, with their bounds ([`process`]: the protocol, `RLIMIT_DATA`,
//! sessions, pidfds, a tenant's cgroup).
//!
//! It names nothing of `control` or `fleet`: both stand on it.

pub mod admit;
#[cfg(test)]
mod admit_props;
mod kafka_grants;
pub mod operator;
pub mod process;
pub mod push_policy;
mod queue_grants;
pub mod record;
pub mod refusal;
pub mod spec;
mod sync_id;

pub use record::{Counts, RunRecord, RunState, now_ms};
