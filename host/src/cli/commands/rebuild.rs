//! `weir run --full --rebuild`: every indexer's plugin config gets
//! `_weir_rebuild` = the run's generation, and an indexer that supports it
//! writes a new index, swapped in when the full sync is complete
//! (docs/sync.md). Indexers that do not take the key refuse it in
//! `check-config`: the run is then refused, naming them.

use std::collections::HashSet;
use std::path::Path;

use weir::config::{Config, Problem, Problems};
use weir::run::{LoadedPlugins, Runner};
use weir::topology::{self, Mode, SetupError};

use super::super::prepare::{Stopped, prepare, prepare_with, report_invalid};

/// The key the host sets in an indexer's plugin config.
const KEY: &str = "_weir_rebuild";

/// The run's generation: its start in milliseconds since the epoch.
fn generation() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Where each indexer sits, with the connectors that feed it.
fn indexers(config: &Config) -> Vec<(String, Vec<&str>)> {
    let feeding = |pipeline: &str| -> Vec<&str> {
        config
            .connectors
            .iter()
            .filter(|c| c.pipeline == pipeline)
            .map(|c| c.name.as_str())
            .collect()
    };
    let mut out: Vec<(String, Vec<&str>)> = config
        .pipelines
        .iter()
        .filter(|p| p.indexer.is_some())
        .map(|p| (format!("pipelines.{}.indexer", p.name), feeding(&p.name)))
        .collect();
    if config.indexer.is_some() {
        let shared = config
            .pipelines
            .iter()
            .filter(|p| p.indexer.is_none())
            .flat_map(|p| feeding(&p.name))
            .collect();
        out.push(("indexer".to_owned(), shared));
    }
    out
}

/// `config` with `_weir_rebuild` in every indexer's plugin config, or why
/// it cannot rebuild.
fn inject(mut config: Config, mode: Mode, generation: u64) -> Result<Config, SetupError> {
    let mut errors = Problems::default();
    if mode != Mode::Local {
        errors.push(Problem::whole(
            "`--rebuild` runs in local mode only: the indexers of Kafka and Hybrid modes are \
             processes of their own (`weir indexer`), which this run cannot switch",
        ));
    }
    for (location, connectors) in indexers(&config) {
        if connectors.len() > 1 {
            errors.push(Problem::new(
                location,
                format!(
                    "`--rebuild` swaps the index when one connector's full sync is complete, and {} \
                     connectors feed this indexer ({}): rebuild with a config that has one",
                    connectors.len(),
                    connectors.join(", ")
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(SetupError::Invalid(errors));
    }
    let specs = config
        .pipelines
        .iter_mut()
        .filter_map(|p| p.indexer.as_mut())
        .chain(config.indexer.as_mut());
    for indexer in specs {
        if let Some(settings) = indexer.plugin.config.as_object_mut() {
            settings.insert(KEY.to_owned(), generation.to_string().into());
        }
    }
    Ok(config)
}

/// The runner of `path` for a rebuild, its plugins validated. An indexer
/// that does not take the key refuses it as unknown (at the key, or at its
/// config's root): such a problem, which a validation without the key does
/// not have, is said to be the rebuild's.
pub(super) fn prepare_rebuild(path: &Path, mode: Mode) -> Result<(Runner, LoadedPlugins), Stopped> {
    let runner = prepare_with(path, |config| {
        topology::runner(inject(config, mode, generation())?, mode)
    })?;
    let errors = match runner.validate() {
        Ok(plugins) => return Ok((runner, plugins)),
        Err(errors) => errors,
    };
    let plain: HashSet<(String, String)> = prepare(path, mode)
        .ok()
        .and_then(|runner| runner.validate().err())
        .map(|errors| {
            errors
                .iter()
                .map(|e| (e.location.clone(), e.message.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut explained = Problems::default();
    for error in errors.iter() {
        let mut error = error.clone();
        let at_key = error.location.ends_with(".plugin.config")
            || error.location.ends_with(&format!(".plugin.config.{KEY}"));
        if at_key && !plain.contains(&(error.location.clone(), error.message.clone())) {
            error.message = format!(
                "this indexer does not support `--rebuild` (opensearch-indexer does): {}",
                error.message
            );
        }
        explained.push(error);
    }
    report_invalid(path, &explained);
    Err(Stopped::Invalid)
}
