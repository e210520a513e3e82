//! Every plugin of a config with where it sits: the one walk that checks,
//! admission and the runner share.

use super::{Config, ConnectorConfig, PipelineConfig};
use crate::plugin::PluginSpec;

/// The part a plugin plays, with the names that place it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginRole<'a> {
    /// `[[connectors]]` entry `name`, feeding `pipeline`.
    Connector { name: &'a str, pipeline: &'a str },
    /// Stage `name` of `pipeline`.
    Stage { pipeline: &'a str, name: &'a str },
    /// The shadow of stage `name` of `pipeline`.
    Shadow { pipeline: &'a str, name: &'a str },
    /// The top-level `[indexer]` (no pipeline) or `pipeline`'s own.
    Indexer { pipeline: Option<&'a str> },
    /// `[dead_letters]`'s plugin.
    DeadLetters,
}

/// One plugin and where it sits.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginAt<'a> {
    /// `connectors.books`, `pipelines.books.stages.trim`,
    /// `pipelines.books.indexer`, `indexer` or `dead_letters`; the plugin's
    /// own table is `<location>.plugin`.
    pub location: String,
    pub role: PluginRole<'a>,
    pub spec: &'a PluginSpec,
}

impl Config {
    /// Every plugin with where it sits: connectors, then each pipeline's
    /// stages and own indexer, then `[indexer]`, then the dead letters'.
    pub fn plugins(&self) -> impl Iterator<Item = PluginAt<'_>> {
        let connectors = self.connectors.iter().map(|c| PluginAt {
            location: format!("connectors.{}", c.name),
            role: PluginRole::Connector {
                name: &c.name,
                pipeline: &c.pipeline,
            },
            spec: &c.plugin,
        });
        let pipelines = self.pipelines.iter().flat_map(|p| {
            let stages = p.stages.iter().flat_map(move |s| {
                let stage = PluginAt {
                    location: format!("pipelines.{}.stages.{}", p.name, s.name),
                    role: PluginRole::Stage {
                        pipeline: &p.name,
                        name: &s.name,
                    },
                    spec: &s.plugin,
                };
                let shadow = s.shadow.iter().map(move |shadow| PluginAt {
                    location: format!("pipelines.{}.stages.{}.shadow", p.name, s.name),
                    role: PluginRole::Shadow {
                        pipeline: &p.name,
                        name: &s.name,
                    },
                    spec: &shadow.plugin,
                });
                std::iter::once(stage).chain(shadow)
            });
            let own = p.indexer.iter().map(move |i| PluginAt {
                location: format!("pipelines.{}.indexer", p.name),
                role: PluginRole::Indexer {
                    pipeline: Some(&p.name),
                },
                spec: &i.plugin,
            });
            stages.chain(own)
        });
        let indexer = self.indexer.iter().map(|i| PluginAt {
            location: "indexer".to_owned(),
            role: PluginRole::Indexer { pipeline: None },
            spec: &i.plugin,
        });
        let dead_letters = self.dead_letters.plugin.iter().map(|spec| PluginAt {
            location: "dead_letters".to_owned(),
            role: PluginRole::DeadLetters,
            spec,
        });
        connectors
            .chain(pipelines)
            .chain(indexer)
            .chain(dead_letters)
    }

    /// Every plugin, in the order of [`Config::plugins`], to change, with
    /// the pipeline it serves (none for `[indexer]` and the dead letters').
    pub(crate) fn plugins_mut(&mut self) -> impl Iterator<Item = (Option<&str>, &mut PluginSpec)> {
        let connectors = self.connectors.iter_mut().map(|c| {
            let ConnectorConfig {
                pipeline, plugin, ..
            } = c;
            (Some(pipeline.as_str()), plugin)
        });
        let pipelines = self.pipelines.iter_mut().flat_map(|p| {
            let PipelineConfig {
                name,
                stages,
                indexer,
            } = p;
            let name = name.as_str();
            stages
                .iter_mut()
                .flat_map(|s| {
                    std::iter::once(&mut s.plugin)
                        .chain(s.shadow.iter_mut().map(|shadow| &mut shadow.plugin))
                })
                .chain(indexer.iter_mut().map(|i| &mut i.plugin))
                .map(move |spec| (Some(name), spec))
        });
        connectors
            .chain(pipelines)
            .chain(self.indexer.iter_mut().map(|i| (None, &mut i.plugin)))
            .chain(self.dead_letters.plugin.iter_mut().map(|spec| (None, spec)))
    }
}
