//! Checking a whole config before a run: its structure, then every plugin
//! loaded and asked about its own settings, every problem reported at once.

use std::collections::HashMap;

use super::Runner;
use crate::config::{ConfigError, ConfigErrors};
use crate::plugin::{ConnectorPlugin, IndexerPlugin, PluginError, PluginSpec, StagePlugin};

/// Every plugin of a config, loaded and with its config checked.
#[derive(Debug)]
pub struct LoadedPlugins {
    pub(super) connectors: HashMap<String, ConnectorPlugin>,
    pub(super) pipelines: HashMap<String, Vec<StagePlugin>>,
    /// Keyed by where the indexer sits in the config (`indexer`, `pipelines.p.indexer`).
    pub(super) indexers: HashMap<String, IndexerPlugin>,
}

fn config_error(location: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        location: location.into(),
        message: message.into(),
    }
}

impl Runner {
    /// Check the whole config, plugins included: every structural problem and
    /// every issue each plugin finds in its own settings, all at once.
    pub fn validate(&self) -> Result<LoadedPlugins, ConfigErrors> {
        let mut errors = self.config.check();
        let load_failed = |location: &str, e: PluginError| {
            config_error(format!("{location}.plugin"), e.to_string())
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
                        config_error(path, i.message)
                    })),
                    Err(e) => errors.push(load_failed(location, e)),
                }
            };
        let loadable = |spec: &PluginSpec| spec.path.is_file();

        let mut connectors = HashMap::new();
        for c in &self.config.connectors {
            let location = format!("connectors.{}", c.name);
            if !loadable(&c.plugin) {
                continue;
            }
            match self.runtime.load_connector(&c.name, &c.plugin) {
                Ok(plugin) => {
                    check(&location, plugin.check_config());
                    connectors.insert(c.name.clone(), plugin);
                }
                Err(e) => check(&location, Err(e)),
            }
        }
        let mut pipelines = HashMap::new();
        for p in &self.config.pipelines {
            let mut stages = Vec::new();
            for s in &p.stages {
                let location = format!("pipelines.{}.stages.{}", p.name, s.name);
                if !loadable(&s.plugin) {
                    continue;
                }
                match self.runtime.load_stage(&s.name, &s.plugin) {
                    Ok(plugin) => {
                        check(&location, plugin.check_config());
                        stages.push(plugin);
                    }
                    Err(e) => check(&location, Err(e)),
                }
            }
            pipelines.insert(p.name.clone(), stages);
        }
        let mut indexers = HashMap::new();
        let indexer_configs = self.config.indexers();
        let dead_letters = self
            .config
            .dead_letters
            .plugin
            .iter()
            .filter(|_| self.config.dead_letters.enabled)
            .map(|spec| ("dead_letters".to_owned(), spec));
        let indexer_specs = indexer_configs
            .map(|(location, indexer)| (location, &indexer.plugin))
            .chain(dead_letters);
        for (location, spec) in indexer_specs {
            if !loadable(spec) {
                continue;
            }
            match self.runtime.load_indexer(&location, spec) {
                Ok(plugin) => {
                    check(&location, plugin.check_config());
                    indexers.insert(location, plugin);
                }
                Err(e) => check(&location, Err(e)),
            }
        }
        if errors.is_empty() {
            Ok(LoadedPlugins {
                connectors,
                pipelines,
                indexers,
            })
        } else {
            Err(ConfigErrors(errors))
        }
    }
}
