//! `[runner]` timeouts: the stall timeout longer than any
//! call a document may wait on and than any wait in a batch not yet full.

use super::Found;
use crate::config::{Config, PluginRole, Problem};

pub(super) fn check(config: &Config, found: &mut Found) {
    // Each duration's own span (zero included) is `bounds.rs`'s.
    let runner = &config.runner;
    let stall = runner.stall_timeout;
    let too_long = config.plugins().find(|at| {
        !matches!(at.role, PluginRole::Connector { .. }) && at.spec.limits.call_timeout() >= stall
    });
    if let Some(at) = too_long {
        let call = at.spec.limits.call_timeout();
        found.push(Problem::new(
            "runner.stall_timeout",
            format!(
                "must be longer than the longest call a document may wait on ({} has call_timeout {call:?})",
                at.location
            ),
        ));
    }
    let mut waits = config.pipelines.iter().flat_map(|p| {
        p.stages.iter().map(move |s| {
            (
                format!("pipelines.{}.stages.{}", p.name, s.name),
                s.batch.wait,
            )
        })
    });
    if let Some((location, wait)) = waits.find(|(_, wait)| *wait >= stall) {
        found.push(Problem::new(
            "runner.stall_timeout",
            format!(
                "must be longer than a worker waits to fill a stage's batch ({location} has batch.wait {wait:?})"
            ),
        ));
    }
    // The last documents of a run wait `batch_timeout` in a batch that is
    // not full, finishing nothing: as long a wait is taken for a stall.
    if let Some((location, indexer)) = config.indexers().find(|(_, i)| i.batch_timeout >= stall) {
        found.push(Problem::new(
            "runner.stall_timeout",
            format!(
                "must be longer than documents may wait in a batch that is not full ({location} has batch_timeout {:?})",
                indexer.batch_timeout
            ),
        ));
    }
}
