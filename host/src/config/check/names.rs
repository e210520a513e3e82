//! Names and references: connectors exist and are uniquely named, each
//! names a pipeline that has an indexer, pipelines and their stages are
//! uniquely named, and names and their numbers are bounded: they become
//! metric labels, log fields and the locations in messages.

use std::collections::HashSet;

use super::Found;
use crate::config::{Config, Problem};

/// Longest name of a connector, pipeline or stage, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// Most connectors, and most pipelines, one config may have.
pub const MAX_CONNECTORS: usize = 256;
pub const MAX_PIPELINES: usize = 256;
/// Most stages one pipeline may have.
pub const MAX_STAGES: usize = 256;

pub(super) fn check(config: &Config, found: &mut Found) {
    bounded(config, found);
    if let Some(why) = config
        .state
        .id
        .as_deref()
        .and_then(crate::config::state::state_id_problem)
    {
        found.push(Problem::new("state.id", why));
    }
    // Without connectors and an indexer, a config is one of pipelines only:
    // `weir test` runs its cases, and a run refuses it (see `needs_a_source`).
    if config.connectors.is_empty() && config.indexers().next().is_some() {
        found.push(Problem::new(
            "connectors",
            "at least one connector is needed",
        ));
    }
    let mut names = HashSet::new();
    for c in &config.connectors {
        if !names.insert(&c.name) {
            found.push(Problem::new(
                format!("connectors.{}", c.name),
                "duplicate connector name",
            ));
        }
        if config.pipeline(&c.pipeline).is_none() {
            found.push(Problem::new(
                format!("connectors.{}.pipeline", c.name),
                format!("no pipeline is named `{}`", c.pipeline),
            ));
        } else if config.indexer_for(&c.pipeline).is_none() {
            found.push(Problem::new(
                format!("pipelines.{}", c.pipeline),
                "no indexer: add an [indexer] section, or one to this pipeline",
            ));
        }
    }
    let mut names = HashSet::new();
    for p in &config.pipelines {
        if !names.insert(&p.name) {
            found.push(Problem::new(
                format!("pipelines.{}", p.name),
                "duplicate pipeline name",
            ));
        }
        let mut stage_names = HashSet::new();
        for s in &p.stages {
            if !stage_names.insert(&s.name) {
                found.push(Problem::new(
                    format!("pipelines.{}.stages.{}", p.name, s.name),
                    "duplicate stage name in this pipeline",
                ));
            }
        }
    }
}

/// Names that are not empty, short and printable; not too many of them.
fn bounded(config: &Config, found: &mut Found) {
    let mut too_many = |location: String, count: usize, max: usize| {
        if count > max {
            found.push(Problem::new(
                location,
                format!("{count} is more than the {max} a config may have"),
            ));
        }
    };
    too_many("connectors".into(), config.connectors.len(), MAX_CONNECTORS);
    too_many("pipelines".into(), config.pipelines.len(), MAX_PIPELINES);
    for p in &config.pipelines {
        too_many(
            format!("pipelines.{}.stages", clip(&p.name)),
            p.stages.len(),
            MAX_STAGES,
        );
    }
    let names = config
        .connectors
        .iter()
        .map(|c| ("connectors", &c.name))
        .chain(config.pipelines.iter().map(|p| ("pipelines", &p.name)))
        .chain(config.pipelines.iter().flat_map(|p| {
            p.stages
                .iter()
                .map(move |s| ("pipelines.*.stages", &s.name))
        }));
    for (table, name) in names {
        let why = if name.is_empty() {
            Some("a name must not be empty".to_owned())
        } else if name.len() > MAX_NAME_BYTES {
            Some(format!(
                "a name of {} bytes is longer than the {MAX_NAME_BYTES} a name may have",
                name.len()
            ))
        } else if name.chars().any(char::is_control) {
            Some("a name must not hold control characters".to_owned())
        } else {
            None
        };
        if let Some(why) = why {
            found.push(Problem::new(format!("{table}.{}", clip(name)), why));
        }
    }
}

/// `name` as a location may quote it: at most its first 32 characters.
fn clip(name: &str) -> String {
    match name.char_indices().nth(32) {
        Some((at, _)) => format!("{}...", &name[..at]).escape_debug().to_string(),
        None => name.escape_debug().to_string(),
    }
}
