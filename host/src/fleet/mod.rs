//! Hosted ingestion past one machine: `weir serve` with a `[fleet]` sends
//! its tenants' runs to a fleet of `weir fleet` workers over Kafka.
//!
//! - The control plane publishes, for each tenant config it runs, a
//!   [`Spec`] (the tenant, the config, its plugins by SHA-256, a random
//!   topic prefix) on the compacted topic `<name>_pipelines`; the run's
//!   connectors publish to the spec's topics in Kafka mode.
//! - Every fleet worker ([`worker`]) follows that topic and serves each
//!   active spec's pipelines: it fetches their plugins from the control
//!   plane by hash, verifies them, and runs each pipeline's worker–indexer
//!   pairs in a process of its own ([`pipeline`]), admitted again under the
//!   spec's tenant's policy. Kafka's group protocol spreads the partitions
//!   over the fleet.
//! - Runs are kept on `<name>_runs` (compacted) as well as in the control
//!   plane's SQLite file; the control plane that leads (the member of group
//!   `<name>-control` owning `<name>_control`) serves the API, and a
//!   standby that takes over resumes the runs that were going on from their
//!   journals (see `messenger::kafka::journal`).

pub mod pipeline;
pub mod worker;

pub use crate::tenancy::spec::{FleetConfig, PluginRef, Spec};
