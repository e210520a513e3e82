//! A tenant's sync state through the API: what the syncing connectors of
//! one of its runs' configs keep (`GET /api/runs/{id}/state`), and clearing
//! it (`POST /api/runs/{id}/state/reset`), as `weir state show|reset` does
//! for a config file. A tenant reaches only its own runs, and its runs
//! keep state only in its own file (or, under a fleet, its own topics).
//!
//! Which sync a submitted config's connectors keep state for: its
//! `[state] id` when it names one (two configs share state only when they
//! name the same id), else [`default_sync_id`], so that two configs of one
//! tenant never read or write each other's state by accident.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{ApiError, ControlPlane, Principal, start};
use crate::config::Config;
use crate::run::{
    LoadedPlugins, Runner, StateInspectError, StateQuery, SyncReset, SyncState,
    sync::{canonical, source_fingerprint},
};

/// The sync of a submitted config that names none: `cfg-` and 16 hex
/// digits of SHA-256 over what says where its documents come from and go
/// to: each connector's pipeline, name and source settings (its plugin's
/// config and grants, as a change of source is told), and each of their
/// pipelines' indexer (its plugin's file name, config and folders).
/// Submitting the same config again, or one whose stages or limits
/// changed, resumes its state; a config that reads another source or
/// writes elsewhere is another sync. (Name it with `[state] id` to keep
/// one sync across such changes: a changed source is then told and its
/// full sync cleans up.)
pub(super) fn default_sync_id(config: &Config) -> String {
    let mut connectors: Vec<Value> = config
        .connectors
        .iter()
        .map(|c| {
            Value::from(format!(
                "{}/{}={}",
                c.pipeline,
                c.name,
                source_fingerprint(c)
            ))
        })
        .collect();
    connectors.sort_by_key(ToString::to_string);
    let mut pipelines: Vec<&str> = config
        .connectors
        .iter()
        .map(|c| c.pipeline.as_str())
        .collect();
    pipelines.sort_unstable();
    pipelines.dedup();
    let indexers: Vec<Value> = pipelines
        .into_iter()
        .map(|pipeline| match config.indexer_for(pipeline) {
            Some((_, indexer)) => {
                let plugin = &indexer.plugin;
                let file = plugin
                    .path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned());
                let dirs: Vec<String> = plugin
                    .grants
                    .dirs
                    .iter()
                    .map(|d| format!("{}={}", d.host.display(), d.guest))
                    .collect();
                serde_json::json!({
                    "pipeline": pipeline,
                    "file": file,
                    "config": canonical(&plugin.config),
                    "dirs": dirs,
                })
            }
            None => serde_json::json!({ "pipeline": pipeline }),
        })
        .collect();
    let settings = serde_json::json!({ "connectors": connectors, "indexers": indexers });
    let digest = Sha256::digest(settings.to_string());
    format!("cfg-{}", hex::encode(&digest[..8]))
}

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
        let plugins = runner.validate().map_err(|errors| {
            ApiError::Invalid(errors.0.iter().map(ToString::to_string).collect())
        })?;
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

    fn config(text: &str) -> Config {
        Config::parse(text, std::path::Path::new("/plugins"), std::iter::empty()).expect("a config")
    }

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
    fn a_config_without_an_id_is_its_sources_and_destinations() {
        let id = default_sync_id(&config(ONE));
        assert!(id.starts_with("cfg-") && id.len() == 20, "{id}");
        assert!(
            crate::config::state::state_id_problem(&id).is_none(),
            "{id}"
        );
        // Stages, threads, limits: the same sync.
        let more = ONE.replace(
            "stages = []",
            r#"stages = [{ name = "t", plugin = { path = "trim.wasm" } }]"#,
        ) + "\n[worker]\nthreads = 3\n";
        assert_eq!(default_sync_id(&config(&more)), id);
        // Another source, another destination, another name: another sync.
        for other in [
            ONE.replace("/d/a.jsonl", "/d/b.jsonl"),
            ONE.replace("/out/a.jsonl", "/out/b.jsonl"),
            ONE.replace("name = \"files\"", "name = \"other\""),
        ] {
            assert_ne!(default_sync_id(&config(&other)), id, "{other}");
        }
    }

    #[test]
    fn a_live_runs_pipelines_are_read_from_its_config() {
        assert_eq!(connector_pipelines(ONE), ["books"]);
        assert!(connector_pipelines("not toml [").is_empty());
    }
}
