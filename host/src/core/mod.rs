//! The core layer: the types every other part of Weir speaks in, and that
//! depend on nothing else in the crate (only std and data crates such as
//! serde). Documents, the events a run counts, failures and dead letters,
//! limit names, the one shape of a reported problem, and where two JSON
//! values differ (for `weir test` and shadow stages) live here.
//!
//! The rule is checked by `tests/all/architecture.rs`: no file under
//! `core/` names another module of the crate.

pub mod backoff;
pub mod condition;
pub(crate) mod differences;
pub mod document;
pub mod event;
pub mod failure;
pub mod limit;
pub mod messages;
pub mod problem;
pub mod sample;
pub mod schedule;
pub mod state;
pub mod sync;
pub mod text;
pub mod time;
pub mod trap;
