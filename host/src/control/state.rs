//! A tenant's sync state through the API: what the syncing connectors of
//! one of its runs' configs keep (`GET /api/runs/{id}/state`), and clearing
//! it (`POST /api/runs/{id}/state/reset`), as `weir state show|reset` does
//! for a config file. A tenant reaches only its own runs, and its runs
//! keep state only in its own file (or, under a fleet, its own topics).
//! (Which sync a config keeps state for when it names none is
//! admission's: `tenancy::sync_id`.)

use super::{ApiError, ControlPlane, Principal, start};
use crate::run::{LoadedPlugins, Runner, StateInspectError, StateQuery, SyncReset, SyncState};

/// What the API says of a config's state: never where on the server it
/// is kept, nor why a store failed (the server's log says).
fn answer(tenant: &str, e: StateInspectError) -> ApiError {
    match e {
        StateInspectError::NotKept(_) => ApiError::NoState(format!(
            "no state is kept for this run's config (tenant `{tenant}`): its syncing connectors have not kept any yet"
        )),
        StateInspectError::Store(why) => {
            tracing::warn!(tenant, error = %why, "a tenant's sync state cannot be read");
            ApiError::Internal(format!(
                "tenant `{tenant}`'s state cannot be read or cleared (the server's log says why)"
            ))
        }
        other => ApiError::BadRequest(other.to_string()),
    }
}

/// `where` as a tenant is told it.
fn kept_in(tenant: &str) -> String {
    format!("weir serve (tenant `{tenant}`'s state)")
}

impl ControlPlane {
    /// The runner of run `id`'s config, admitted as the run was, with its
    /// state where the run keeps it, and its plugins loaded (which
    /// connectors keep state is read from their components); the run's
    /// tenant.
    fn state_runner(
        &self,
        who: &Principal,
        id: &str,
    ) -> Result<(Runner, LoadedPlugins, String), ApiError> {
        let run = self.get(who, id)?;
        let tenant = self
            .operator
            .tenant(&run.record.tenant)
            .ok_or(ApiError::NoSuchTenant)?;
        let text = self.store.config_of(id)?.ok_or(ApiError::NoSuchRun)?;
        let mut config = start::admitted(&self.operator, tenant, id, &text)?;
        let mode = match &self.fleet {
            None => crate::topology::Mode::Local,
            Some(fleet) => {
                // The state topics a fleet run keeps its tenant's state on.
                config.kafka = Some(crate::config::KafkaConfig {
                    state_prefix: Some(fleet.config.state_prefix(&tenant.name)),
                    ..fleet.config.kafka.clone()
                });
                crate::topology::Mode::Kafka
            }
        };
        let runner = crate::topology::runner(config, mode).map_err(ApiError::internal)?;
        let plugins = runner.validate().map_err(ApiError::Invalid)?;
        Ok((runner, plugins, tenant.name.clone()))
    }

    /// What the syncing connectors of run `id`'s config keep (or
    /// `query.connector`'s), as `weir state show` shows it.
    pub fn sync_states(
        &self,
        who: &Principal,
        id: &str,
        query: &StateQuery,
    ) -> Result<Vec<SyncState>, ApiError> {
        let (runner, plugins, tenant) = self.state_runner(who, id)?;
        let mut syncs = runner
            .sync_states(&plugins, query)
            .map_err(|e| answer(&tenant, e))?;
        for sync in &mut syncs {
            sync.kept_in = kept_in(&tenant);
        }
        Ok(syncs)
    }

    /// Clear what the syncing connectors of run `id`'s config keep (or
    /// `connector`'s): their next run is a full sync. Refused (409) while a
    /// run of the tenant that feeds one of those pipelines goes on: a run
    /// holds its state and would keep it again.
    pub fn reset_sync_states(
        &self,
        who: &Principal,
        id: &str,
        connector: Option<&str>,
    ) -> Result<Vec<SyncReset>, ApiError> {
        let (runner, plugins, tenant) = self.state_runner(who, id)?;
        let pipelines: Vec<String> = runner
            .config()
            .connectors
            .iter()
            .filter(|c| connector.is_none_or(|only| c.name == only))
            .map(|c| c.pipeline.clone())
            .collect();
        let live: Vec<String> = {
            let live = self.lock();
            live.runs
                .values()
                .filter(|r| r.tenant == tenant)
                .map(|r| r.id.clone())
                .collect()
        };
        for other in live {
            let text = self.store.config_of(&other)?.unwrap_or_default();
            if connector_pipelines(&text)
                .iter()
                .any(|p| pipelines.contains(p))
            {
                return Err(ApiError::StateInUse(format!(
                    "run {other} of tenant `{tenant}` feeds the same pipelines and keeps this state while it goes on: reset it once that run has ended"
                )));
            }
        }
        let mut resets = runner
            .reset_sync_states(&plugins, connector)
            .map_err(|e| answer(&tenant, e))?;
        for reset in &mut resets {
            reset.kept_in = kept_in(&tenant);
        }
        tracing::info!(run_id = %id, tenant, "sync state reset through the API");
        Ok(resets)
    }
}

/// The pipelines the connectors of a config (TOML text) feed; none when it
/// cannot be read.
fn connector_pipelines(text: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    table
        .get("connectors")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("pipeline")?.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
        [[connectors]]
        name = "files"
        pipeline = "books"
        plugin = { path = "file_connector.wasm", config = { paths = ["/d/a.jsonl"], incremental = true } }
        [[pipelines]]
        name = "books"
        stages = []
        [indexer]
        plugin = { path = "jsonl_indexer.wasm", config = { path = "/out/a.jsonl" } }
    "#;

    #[test]
    fn a_live_runs_pipelines_are_read_from_its_config() {
        assert_eq!(connector_pipelines(ONE), ["books"]);
        assert!(connector_pipelines("not toml [").is_empty());
    }
}
