//! Stage conditions (`when`): each compiles, within its bounds, and every
//! problem is reported at its place in the condition; and which documents
//! a stage's shadow runs on.

use super::Found;
use crate::config::{Config, Problem};

pub(super) fn check(config: &Config, found: &mut Found) {
    for pipeline in &config.pipelines {
        for stage in &pipeline.stages {
            if let Some(shadow) = &stage.shadow {
                let at = format!("pipelines.{}.stages.{}.shadow", pipeline.name, stage.name);
                if let Some(percent) = shadow.percent
                    && !(0.0..=100.0).contains(&percent)
                {
                    found.push(Problem::new(
                        format!("{at}.percent"),
                        format!("{percent} is not a share from 0 to 100"),
                    ));
                }
                if shadow.ids.len() > crate::config::ShadowConfig::MAX_IDS {
                    found.push(Problem::new(
                        format!("{at}.ids"),
                        format!(
                            "{} ids: at most {}",
                            shadow.ids.len(),
                            crate::config::ShadowConfig::MAX_IDS
                        ),
                    ));
                }
            }
            let Some(when) = &stage.when else { continue };
            if let Err(problems) = when.compile() {
                let at = format!("pipelines.{}.stages.{}.when", pipeline.name, stage.name);
                for p in problems {
                    let location = if p.location.is_empty() {
                        at.clone()
                    } else {
                        format!("{at}.{}", p.location)
                    };
                    found.push(Problem::new(location, p.message));
                }
            }
        }
    }
}
