//! From a tenant's config to a runner: admitted, wired and validated the
//! same way on a thread of the server, in a run's own process, and (the
//! admission) when a live run reloads.

use std::path::PathBuf;
use std::sync::Arc;

use super::ApiError;
use crate::config::Config;
use crate::run::{Runner, Throttle};
use crate::tenancy::admit;
use crate::tenancy::operator::{OperatorConfig, TenantPolicy};
use crate::tenancy::process::protocol::FleetRun;

/// Where run `id`'s files are kept (its dead letters).
pub(super) fn run_dir(operator: &OperatorConfig, id: &str) -> PathBuf {
    operator.server.data_dir.join("runs").join(id)
}

/// `text` of `tenant` as run `id`, admitted as every config is: a
/// submission and a reload of a live run alike.
pub(super) fn admitted(
    operator: &OperatorConfig,
    tenant: &TenantPolicy,
    id: &str,
    text: &str,
) -> Result<Config, ApiError> {
    let dead_letters = run_dir(operator, id).join("dead-letters.jsonl");
    let mut config = admit::admit(text, tenant, operator, &dead_letters)
        .map_err(|refusal| ApiError::refused(refusal, &tenant.name))?;
    config.runner.cache_dir = operator.server.cache_dir.clone();
    config.trace.path = trace_dir(operator, id);
    // A tenant's trace takes the server's disk: never more than the default.
    config.trace.max_mib = config
        .trace
        .max_mib
        .min(crate::config::TraceConfig::DEFAULT_MAX_MIB);
    Ok(config)
}

/// Where run `id` keeps its trace, when its config keeps one: its own folder.
pub(super) fn trace_dir(operator: &OperatorConfig, id: &str) -> PathBuf {
    run_dir(operator, id).join("trace")
}

/// Run `text` of `tenant`, admitted and validated, ready to run as `id`,
/// under `throttle` when the tenant has a rate: the same steps in this
/// process and in a run's own.
pub(in crate::control) fn prepare(
    operator: &OperatorConfig,
    tenant: &TenantPolicy,
    id: &str,
    text: &str,
    throttle: Option<Arc<Throttle>>,
    fleet: Option<&FleetRun>,
) -> Result<(Runner, crate::run::LoadedPlugins), ApiError> {
    let mut config = admitted(operator, tenant, id, text)?;
    let mut runner = match fleet {
        None => local_runner(config)?,
        Some(fleet) => {
            // The run's connectors here; the fleet's workers do the rest.
            config.kafka = Some(fleet.kafka.clone());
            let runner = if fleet.resume {
                crate::topology::resuming_runner(config)
            } else {
                crate::topology::runner(config, crate::topology::Mode::Kafka)
            };
            runner.map_err(ApiError::internal)?
        }
    };
    if let Some(throttle) = throttle {
        runner = runner.with_throttle(throttle);
    }
    let plugins = runner.validate().map_err(ApiError::Invalid)?;
    Ok((runner, plugins))
}

/// The runner of an admitted `config`: a local run, as `weir run` makes it.
/// The only place the control plane wires a [`Runner`].
fn local_runner(config: Config) -> Result<Runner, ApiError> {
    crate::topology::runner(config, crate::topology::Mode::Local).map_err(ApiError::internal)
}
