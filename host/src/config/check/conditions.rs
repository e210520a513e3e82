//! Stage conditions (`when`): each compiles, within its bounds, and every
//! problem is reported at its place in the condition.

use super::Found;
use crate::config::{Config, ConfigError};

pub(super) fn check(config: &Config, found: &mut Found) {
    for pipeline in &config.pipelines {
        for stage in &pipeline.stages {
            let Some(when) = &stage.when else { continue };
            if let Err(problems) = when.compile() {
                let at = format!("pipelines.{}.stages.{}.when", pipeline.name, stage.name);
                for p in problems {
                    let location = if p.at.is_empty() {
                        at.clone()
                    } else {
                        format!("{at}.{}", p.at)
                    };
                    found.push(ConfigError::new(location, p.message));
                }
            }
        }
    }
}
