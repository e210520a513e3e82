//! What a tap may name: the pipelines and stages of the running config,
//! and the refusal of a tap that names what it lacks.

use super::TapFilter;

/// The pipelines a tap may name, with their stages, as the running config
/// has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapNames(std::collections::BTreeMap<String, Vec<String>>);

impl TapNames {
    /// Each pipeline's name, with its stages' names.
    pub fn new(pipelines: impl IntoIterator<Item = (String, Vec<String>)>) -> Self {
        Self(pipelines.into_iter().collect())
    }

    /// Whether `filter` names a pipeline (and stage) there is.
    pub fn check(&self, filter: &TapFilter) -> Result<(), TapRefusal> {
        let Some(stages) = self.0.get(&filter.pipeline) else {
            return Err(TapRefusal::NoPipeline {
                pipeline: filter.pipeline.clone(),
                known: self.0.keys().cloned().collect(),
            });
        };
        match &filter.stage {
            Some(stage) if !stages.contains(stage) => Err(TapRefusal::NoStage {
                pipeline: filter.pipeline.clone(),
                stage: stage.clone(),
                known: stages.clone(),
            }),
            _ => Ok(()),
        }
    }
}

/// Why a tap was not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TapRefusal {
    #[error("{max} taps are open: try again later")]
    TooMany { max: usize },
    #[error("no pipeline `{pipeline}` (there are: {})", names(known))]
    NoPipeline {
        pipeline: String,
        known: Vec<String>,
    },
    #[error(
        "pipeline `{pipeline}` has no stage `{stage}` (it has: {}; without a stage, a tap takes what leaves the pipeline)",
        names(known)
    )]
    NoStage {
        pipeline: String,
        stage: String,
        known: Vec<String>,
    },
}

fn names(known: &[String]) -> String {
    if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    }
}
