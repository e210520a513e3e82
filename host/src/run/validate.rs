//! Checking a whole config before a run: its structure, then every plugin
//! loaded and asked about its own settings, every problem reported at once.

use std::collections::HashMap;

use super::Runner;
use crate::config::PluginRole;
use crate::config::{Problem, Problems};
use crate::plugin::{
    ConnectorPlugin, DirGrant, IndexerPlugin, PluginError, PluginLabel, PluginSpec, StagePlugin,
};

/// Every plugin of a config, loaded and with its config checked.
#[derive(Debug)]
pub struct LoadedPlugins {
    pub(super) connectors: HashMap<String, ConnectorPlugin>,
    pub(super) pipelines: HashMap<String, Vec<StagePlugin>>,
    /// Stages' shadows, keyed by pipeline and stage.
    pub(super) shadows: HashMap<(String, String), super::shadow::LoadedShadow>,
    /// Keyed by where the indexer sits in the config (`indexer`, `pipelines.p.indexer`).
    pub(super) indexers: HashMap<String, IndexerPlugin>,
    /// Each pipeline's stages as a digest of their settings and of the
    /// components loaded here (see `reload.rs`).
    pub(super) digests: HashMap<String, [u8; 32]>,
}

impl Runner {
    /// Check the whole config, plugins included: every structural problem and
    /// every issue each plugin finds in its own settings, all at once.
    pub fn validate(&self) -> Result<LoadedPlugins, Problems> {
        let mut errors = self.config.check();
        let load_failed = |location: &str, e: PluginError| {
            Problem::new(format!("{location}.plugin"), e.to_string())
        };
        let mut check =
            |location: &str, issues: Result<Vec<crate::plugin::ConfigIssue>, PluginError>| {
                match issues {
                    Ok(issues) => errors.extend(issues.into_iter().map(|i| {
                        let path = if i.path.is_empty() {
                            format!("{location}.plugin.config")
                        } else {
                            format!("{location}.plugin.config.{}", i.path)
                        };
                        Problem::new(path, i.message)
                    })),
                    Err(e) => errors.push(load_failed(location, e)),
                }
            };
        // A plugin whose file or granted directory is missing is reported
        // once, by the structural checks, not again as a failed load.
        let loadable = |spec: &PluginSpec| {
            spec.path.is_file() && !spec.grants.dirs.iter().any(DirGrant::is_missing)
        };

        let config = &self.config;
        let mut connectors = HashMap::new();
        let mut pipelines: HashMap<String, Vec<StagePlugin>> = config
            .pipelines
            .iter()
            .map(|p| (p.name.clone(), Vec::new()))
            .collect();
        let mut indexers = HashMap::new();
        let mut shadows = HashMap::new();
        for at in config.plugins().filter(|at| loadable(at.spec)) {
            let location = at.location.as_str();
            // Metrics name the tenant whose pipeline a plugin serves; the
            // top-level indexer and the dead letters', the tenant that owns
            // every pipeline, if one does.
            let tenant = match at.role {
                PluginRole::Connector { pipeline, .. }
                | PluginRole::Stage { pipeline, .. }
                | PluginRole::Shadow { pipeline, .. }
                | PluginRole::Indexer {
                    pipeline: Some(pipeline),
                } => config.tenant_of(pipeline),
                PluginRole::Indexer { pipeline: None } | PluginRole::DeadLetters => {
                    config.sole_tenant()
                }
            };
            match at.role {
                PluginRole::Connector { name, .. } => {
                    let label = PluginLabel { name, tenant };
                    match self.runtime.load_connector(label, at.spec) {
                        Ok(plugin) => {
                            check(location, plugin.check_config());
                            connectors.insert(name.to_owned(), plugin);
                        }
                        Err(e) => check(location, Err(e)),
                    }
                }
                PluginRole::Stage { pipeline, name } => {
                    let label = PluginLabel { name, tenant };
                    match self.runtime.load_stage(label, at.spec) {
                        Ok(plugin) => {
                            check(location, plugin.check_config());
                            pipelines
                                .entry(pipeline.to_owned())
                                .or_default()
                                .push(plugin);
                        }
                        Err(e) => check(location, Err(e)),
                    }
                }
                PluginRole::Shadow {
                    pipeline,
                    name,
                    shadow,
                } => {
                    let label = PluginLabel {
                        name: location,
                        tenant,
                    };
                    match self.runtime.load_stage(label, at.spec) {
                        Ok(plugin) => {
                            check(location, plugin.check_config());
                            shadows.insert(
                                (pipeline.to_owned(), name.to_owned()),
                                super::shadow::LoadedShadow::new(plugin, shadow),
                            );
                        }
                        Err(e) => check(location, Err(e)),
                    }
                }
                PluginRole::DeadLetters if !config.dead_letters.enabled => {}
                PluginRole::Indexer { .. } | PluginRole::DeadLetters => {
                    let label = PluginLabel {
                        name: location,
                        tenant,
                    };
                    match self.runtime.load_indexer(label, at.spec) {
                        Ok(plugin) => {
                            check(location, plugin.check_config());
                            indexers.insert(at.location.clone(), plugin);
                        }
                        Err(e) => check(location, Err(e)),
                    }
                }
            }
        }
        if errors.is_empty() {
            let mut loaded = LoadedPlugins {
                connectors,
                pipelines,
                shadows,
                indexers,
                digests: HashMap::new(),
            };
            loaded.digests = super::reload::stage_digests(config, &loaded);
            Ok(loaded)
        } else {
            Err(Problems(errors))
        }
    }
}
