//! Each submitted run in a process of its own, so that no tenant's run can
//! take the server (or another tenant's run) with it: an abort, a crash, an
//! allocation the machine refuses end that run's process only, and the
//! server records the run as failed, with why. The process is bounded by
//! the operating system: its writable memory (`RLIMIT_DATA`, so a run that
//! balloons fails its own allocations), no core files, and a session of its
//! own, so Linux's scheduler shares the CPU between runs rather than
//! between their threads. It never sees the server's environment (the
//! tenants' and the operator's tokens).
//!
//! The server admits a config before it starts a process (a refusal costs
//! no process); the process admits it again (its directory handles are its
//! own) and validates it, then runs it as a thread of `weir serve` would,
//! talking to the server over its stdin and stdout
//! (`tenancy::process::protocol`). Starting and bounding a process is
//! `tenancy::process`'s; this is the server's side of one ([`Remote`]); the
//! process's own side is `control/run_process.rs` (`weir serve-run`).

mod death;
mod pushes;
mod reloads;
mod remote;
mod taps;

pub use crate::tenancy::process::{Isolation, RunProcess, TenantCpu};
pub(super) use reloads::ReloadError;
pub(super) use remote::Remote;
