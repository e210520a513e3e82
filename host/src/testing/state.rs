//! The state `weir test` gives a connector: empty at the start of each
//! test (a first sync), kept in memory. It is held and bounded as a run
//! holds it ([`HeldState`], the one check of `limits.max_state_mib`): no
//! document of a test is ever done, so every change waits, as in a run
//! whose documents are still on their way, and a test refuses what a run
//! may refuse.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::core::state::HeldState;
use crate::plugin::ConnectorState;

/// A connector's state for one test.
#[derive(Debug)]
pub(crate) struct TestState {
    held: Mutex<HeldState>,
    limit: usize,
    /// Documents the connector published so far: where a change waits.
    published: Arc<AtomicU64>,
}

impl TestState {
    /// An empty state of at most `limit` bytes, for a connector whose
    /// documents `published` counts.
    pub(crate) fn new(limit: usize, published: Arc<AtomicU64>) -> Self {
        Self {
            held: Mutex::new(HeldState::default()),
            limit,
            published,
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HeldState> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ConnectorState for TestState {
    fn get(&self, key: &str) -> Option<String> {
        self.held().view.get(key).cloned()
    }

    fn list(&self, after: Option<&str>, limit: usize) -> Vec<(String, String)> {
        use std::ops::Bound;
        let held = self.held();
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        held.view
            .range::<str, _>((from, Bound::Unbounded))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn size(&self) -> (u64, u64) {
        let held = self.held();
        (held.view.len() as u64, held.view_text as u64)
    }

    /// Counted as a run counts it: the key in the view and its change
    /// waiting (see the module docs).
    fn change(&self, key: &str, value: Option<&str>) -> Result<(), String> {
        let position = self.published.load(Ordering::Acquire);
        self.held().change_at(key, value, position, self.limit)
    }

    fn full_sync(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::state::{CHANGE_ENTRY_BYTES, VIEW_ENTRY_BYTES};

    /// `weir test` refuses the change a run refuses (the run's side, with
    /// the same figures: `run/state/tests.rs`,
    /// `state_past_its_limit_is_refused_and_nothing_changes`): its changes
    /// wait as a run's do while their documents are on their way. It once
    /// counted the keys alone, and let this second key through.
    #[test]
    fn a_test_refuses_what_a_run_refuses() {
        // Room for two keys and their changes, with 100 bytes of text.
        let limit = 2 * (VIEW_ENTRY_BYTES + CHANGE_ENTRY_BYTES) + 100;
        let published = Arc::new(AtomicU64::new(0));
        let state = TestState::new(limit, Arc::clone(&published));
        state.change("a", Some(&"x".repeat(40))).expect("within");
        // The keys alone would fit: 2 keys, 52 bytes of text.
        assert!(2 * VIEW_ENTRY_BYTES + 52 <= limit);
        let error = state
            .change("b", Some(&"y".repeat(10)))
            .expect_err("over the limit with the changes waiting");
        assert!(error.contains("limits.max_state_mib"), "{error}");
        assert_eq!(state.get("b"), None);
        assert_eq!(state.size(), (1, 41), "size counts keys and values only");
        // A removal is let through at the limit (it holds no more).
        state.change("a", None).expect("a removal");
        // Changes of one key after each document each wait, as in a run,
        // until the bound: then they are thinned to the key's last.
        published.store(1, Ordering::Release);
        let room = (1 + VIEW_ENTRY_BYTES) + 3 * (1 + CHANGE_ENTRY_BYTES);
        let state = TestState::new(room, Arc::clone(&published));
        state.change("k", Some("")).expect("within");
        state
            .change("k", Some(""))
            .expect("replaces its change at one position");
        published.store(2, Ordering::Release);
        state.change("k", Some("")).expect("a second change waits");
        published.store(3, Ordering::Release);
        state.change("k", Some("")).expect("a third");
        published.store(4, Ordering::Release);
        state
            .change("k", Some(""))
            .expect("a fourth thins those waiting to the last");
    }
}
