//! The specs the leading control plane has published, which runs use
//! each, and which have been idle long enough to retire: the bookkeeping
//! alone, without Kafka, so that it can be tested on its own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::tenancy::spec::Spec;

/// The fleet's specs as the control plane that leads knows them.
#[derive(Debug, Default)]
pub(super) struct Known {
    pub(super) specs: BTreeMap<String, Spec>,
    /// Run id -> the spec it runs on.
    runs: BTreeMap<String, String>,
    /// Since when each spec no run uses has had none.
    idle_since: BTreeMap<String, Instant>,
}

impl Known {
    /// Add `spec`, published (or found on the topic) at `now`: idle until
    /// a run uses it.
    pub(super) fn insert(&mut self, spec: Spec, now: Instant) {
        self.idle_since.entry(spec.id.clone()).or_insert(now);
        self.specs.insert(spec.id.clone(), spec);
    }

    /// Run `run` uses spec `id` (known) until [`Known::release`].
    pub(super) fn use_spec(&mut self, run: &str, id: &str) {
        self.runs.insert(run.to_owned(), id.to_owned());
        self.idle_since.remove(id);
    }

    /// Run `run` has ended, at `now`: its spec is idle if no other run uses it.
    pub(super) fn release(&mut self, run: &str, now: Instant) {
        let Some(id) = self.runs.remove(run) else {
            return;
        };
        if !self.runs.values().any(|used| *used == id) && self.specs.contains_key(&id) {
            self.idle_since.insert(id, now);
        }
    }

    /// Take out the specs idle for `after` or longer at `now`.
    pub(super) fn retire(&mut self, now: Instant, after: Duration) -> Vec<Spec> {
        let due: Vec<String> = self
            .idle_since
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) >= after)
            .map(|(id, _)| id.clone())
            .collect();
        due.iter()
            .filter_map(|id| {
                self.idle_since.remove(id);
                self.specs.remove(id)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str) -> Spec {
        Spec {
            id: id.into(),
            tenant: "t".into(),
            config: String::new(),
            pipelines: vec!["p".into()],
            plugins: Vec::new(),
            prefix: "w0000000000000000_".into(),
        }
    }

    #[test]
    fn a_spec_retires_only_once_no_run_has_used_it_for_the_whole_idle_time() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let after = Duration::from_secs(60);
        let mut known = Known::default();
        known.insert(spec("a"), s(0));
        known.use_spec("r1", "a");
        known.use_spec("r2", "a");
        assert!(known.retire(s(1000), after).is_empty(), "runs use it");
        known.release("r1", s(1000));
        assert!(known.retire(s(2000), after).is_empty(), "r2 still does");
        known.release("r2", s(2000));
        assert!(known.retire(s(2059), after).is_empty(), "idle 59 s");
        let retired = known.retire(s(2060), after);
        assert_eq!(
            retired.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        assert!(known.specs.is_empty());
        assert!(known.retire(s(9999), after).is_empty(), "retired once");
        known.release("r2", s(9999)); // a late release names nothing known
        assert!(known.retire(s(99_999), after).is_empty());
    }

    #[test]
    fn a_spec_found_on_the_topic_is_idle_from_when_it_was_found_until_used() {
        let t0 = Instant::now();
        let after = Duration::from_secs(10);
        let mut known = Known::default();
        known.insert(spec("a"), t0);
        known.insert(spec("b"), t0);
        known.use_spec("r", "b");
        let retired = known.retire(t0 + after, after);
        assert_eq!(retired.len(), 1);
        assert_eq!(retired[0].id, "a");
        assert!(known.specs.contains_key("b"));
    }
}
