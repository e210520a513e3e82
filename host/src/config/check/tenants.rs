//! `[[tenants]]`: unique names, and each pipeline a tenant names exists
//! and belongs to that tenant alone.

use std::collections::{BTreeMap, HashSet};

use super::Found;
use crate::config::{Config, Problem};

pub(super) fn check(config: &Config, found: &mut Found) {
    let mut tenant_names = HashSet::new();
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for t in &config.tenants {
        if !tenant_names.insert(&t.name) {
            found.push(Problem::new(
                format!("tenants.{}", t.name),
                "duplicate tenant name",
            ));
        }
        for p in &t.pipelines {
            if config.pipeline(p).is_none() {
                found.push(Problem::new(
                    format!("tenants.{}.pipelines", t.name),
                    format!("no pipeline is named `{p}`"),
                ));
            } else if let Some(other) = owner.insert(p, &t.name) {
                found.push(Problem::new(
                    format!("tenants.{}.pipelines", t.name),
                    format!("pipeline `{p}` already belongs to tenant `{other}`"),
                ));
            }
        }
    }
}
