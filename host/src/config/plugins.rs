//! Every plugin of a config with where it sits: the one walk that checks,
//! admission, the runtime's pool sizing and the runner's validation share,
//! shadows included (with their own config), each with the instances a
//! run holds of it.

use super::{Config, ConnectorConfig, PipelineConfig, ShadowConfig};
use crate::plugin::PluginSpec;

/// The part a plugin plays, with the names that place it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PluginRole<'a> {
    /// `[[connectors]]` entry `name`, feeding `pipeline`.
    Connector { name: &'a str, pipeline: &'a str },
    /// Stage `name` of `pipeline`.
    Stage { pipeline: &'a str, name: &'a str },
    /// The shadow of stage `name` of `pipeline`, as `shadow` configures it.
    Shadow {
        pipeline: &'a str,
        name: &'a str,
        shadow: &'a ShadowConfig,
    },
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
    /// Instances of it a run holds at once: one for a connector and the
    /// dead letters' indexer, one per worker thread for a stage and for its
    /// shadow, an indexer's `instances`.
    pub instances: usize,
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
            instances: 1,
        });
        let threads = self.worker.threads;
        let pipelines = self.pipelines.iter().flat_map(move |p| {
            let stages = p.stages.iter().flat_map(move |s| {
                let stage = PluginAt {
                    location: format!("pipelines.{}.stages.{}", p.name, s.name),
                    role: PluginRole::Stage {
                        pipeline: &p.name,
                        name: &s.name,
                    },
                    spec: &s.plugin,
                    instances: threads,
                };
                let shadow = s.shadow.iter().map(move |shadow| PluginAt {
                    location: format!("pipelines.{}.stages.{}.shadow", p.name, s.name),
                    role: PluginRole::Shadow {
                        pipeline: &p.name,
                        name: &s.name,
                        shadow,
                    },
                    spec: &shadow.plugin,
                    instances: threads,
                });
                std::iter::once(stage).chain(shadow)
            });
            let own = p.indexer.iter().map(move |i| PluginAt {
                location: format!("pipelines.{}.indexer", p.name),
                role: PluginRole::Indexer {
                    pipeline: Some(&p.name),
                },
                spec: &i.plugin,
                instances: i.instances,
            });
            stages.chain(own)
        });
        let indexer = self.indexer.iter().map(|i| PluginAt {
            location: "indexer".to_owned(),
            role: PluginRole::Indexer { pipeline: None },
            spec: &i.plugin,
            instances: i.instances,
        });
        let dead_letters = self.dead_letters.plugin.iter().map(|spec| PluginAt {
            location: "dead_letters".to_owned(),
            role: PluginRole::DeadLetters,
            spec,
            instances: 1,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A shadow is in the walk as its stage is, with its own config and as
    /// many instances (one per worker thread), so sizing, admission and
    /// validation see it alike.
    #[test]
    fn shadows_walk_with_their_config_and_instances() {
        let text = r#"
            [worker]
            threads = 3
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = "c.wasm" }
            [[pipelines]]
            name = "p"
            [[pipelines.stages]]
            name = "s"
            plugin = { path = "s.wasm" }
            shadow = { plugin = { path = "s2.wasm" }, percent = 5.0 }
            [indexer]
            plugin = { path = "i.wasm" }
            instances = 2
        "#;
        let config =
            Config::parse(text, std::path::Path::new("."), std::iter::empty()).expect("a config");
        let walked: Vec<(String, usize)> = config
            .plugins()
            .map(|at| (at.location, at.instances))
            .collect();
        assert_eq!(
            walked,
            [
                ("connectors.c".to_owned(), 1),
                ("pipelines.p.stages.s".to_owned(), 3),
                ("pipelines.p.stages.s.shadow".to_owned(), 3),
                ("indexer".to_owned(), 2),
            ]
        );
        let shadow = config
            .plugins()
            .find_map(|at| match at.role {
                PluginRole::Shadow { shadow, .. } => Some(shadow),
                _ => None,
            })
            .expect("the shadow");
        assert_eq!(shadow.percent, Some(5.0));
    }
}
