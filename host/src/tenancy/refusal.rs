//! The one refusal of a tenant's config, wherever it is refused (admission
//! on the server, admission and validation in a run's process, a reload of
//! a live run): a kind that says how the API answers it, and the
//! [`Problems`] (location and message) that say why. It crosses the run
//! process's pipe and the API as it is.

use serde::{Deserialize, Serialize};

use crate::core::problem::Problems;
use crate::run::ReloadRefused;

/// Why a tenant's config was not taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The config is not valid (400): each problem with its location.
    Invalid(#[serde(with = "wire")] Problems),
    /// The config is valid but asks for what the tenant may not have (403).
    Forbidden(#[serde(with = "wire")] Problems),
    /// A reload changes what a running run cannot take up (409): one
    /// problem per section changed, at its key.
    NeedsRestart(#[serde(with = "wire")] Problems),
}

impl Refusal {
    /// Every problem of the refusal.
    pub fn problems(&self) -> &Problems {
        match self {
            Self::Invalid(problems) | Self::Forbidden(problems) | Self::NeedsRestart(problems) => {
                problems
            }
        }
    }
}

impl From<ReloadRefused> for Refusal {
    fn from(refused: ReloadRefused) -> Self {
        match refused {
            ReloadRefused::Invalid(problems) => Self::Invalid(problems),
            ReloadRefused::NeedsRestart(problems) => Self::NeedsRestart(problems),
        }
    }
}

/// [`Problems`] on the wire: a list of `{"location", "message"}`.
mod wire {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::core::problem::{Problem, Problems};

    #[derive(Serialize, Deserialize)]
    struct Wire {
        location: String,
        message: String,
    }

    pub(super) fn serialize<S: Serializer>(problems: &Problems, to: S) -> Result<S::Ok, S::Error> {
        let wire: Vec<Wire> = problems
            .iter()
            .map(|p| Wire {
                location: p.location.clone(),
                message: p.message.clone(),
            })
            .collect();
        wire.serialize(to)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Problems, D::Error> {
        let wire = Vec::<Wire>::deserialize(from)?;
        Ok(wire
            .into_iter()
            .map(|w| Problem::new(w.location, w.message))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::problem::Problem;

    #[test]
    fn a_refusal_crosses_a_pipe_with_each_problems_location_and_message() {
        let refusal = Refusal::Forbidden(
            [
                Problem::new("connectors.c.plugin.path", "not yours\nat all"),
                Problem::whole("the whole config"),
            ]
            .into_iter()
            .collect(),
        );
        let text = serde_json::to_string(&refusal).expect("writes");
        assert!(!text.contains('\n'), "{text}");
        let back: Refusal = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, refusal);
    }
}
