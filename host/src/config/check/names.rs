//! Names and references: connectors exist and are uniquely named, each
//! names a pipeline that has an indexer, pipelines and their stages are
//! uniquely named.

use std::collections::HashSet;

use super::Found;
use crate::config::{Config, ConfigError};

pub(super) fn check(config: &Config, found: &mut Found) {
    if config.connectors.is_empty() {
        found.push(ConfigError::new(
            "connectors",
            "at least one connector is needed",
        ));
    }
    let mut names = HashSet::new();
    for c in &config.connectors {
        if !names.insert(&c.name) {
            found.push(ConfigError::new(
                format!("connectors.{}", c.name),
                "duplicate connector name",
            ));
        }
        if config.pipeline(&c.pipeline).is_none() {
            found.push(ConfigError::new(
                format!("connectors.{}.pipeline", c.name),
                format!("no pipeline is named `{}`", c.pipeline),
            ));
        } else if config.indexer_for(&c.pipeline).is_none() {
            found.push(ConfigError::new(
                format!("pipelines.{}", c.pipeline),
                "no indexer: add an [indexer] section, or one to this pipeline",
            ));
        }
    }
    let mut names = HashSet::new();
    for p in &config.pipelines {
        if !names.insert(&p.name) {
            found.push(ConfigError::new(
                format!("pipelines.{}", p.name),
                "duplicate pipeline name",
            ));
        }
        let mut stage_names = HashSet::new();
        for s in &p.stages {
            if !stage_names.insert(&s.name) {
                found.push(ConfigError::new(
                    format!("pipelines.{}.stages.{}", p.name, s.name),
                    "duplicate stage name in this pipeline",
                ));
            }
        }
    }
}
