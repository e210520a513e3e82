//! The state `weir test` gives a connector: empty at the start of each
//! test (a first sync), kept in memory, every change kept at once.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::core::state::VIEW_ENTRY_BYTES;
use crate::plugin::ConnectorState;

/// A connector's state for one test.
#[derive(Debug)]
pub(crate) struct TestState {
    /// The keys, the bytes the host holds for them, and their text's bytes.
    held: Mutex<(BTreeMap<String, String>, usize, usize)>,
    limit: usize,
}

impl TestState {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            held: Mutex::new((BTreeMap::new(), 0, 0)),
            limit,
        }
    }
}

impl ConnectorState for TestState {
    fn get(&self, key: &str) -> Option<String> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.0.get(key).cloned()
    }

    fn list(&self, after: Option<&str>, limit: usize) -> Vec<(String, String)> {
        use std::ops::Bound;
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        held.0
            .range::<str, _>((from, Bound::Unbounded))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn size(&self) -> (u64, u64) {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        (held.0.len() as u64, held.2 as u64)
    }

    /// Counted as a run counts it (each key's cost in the host beside its
    /// text; changes are kept at once, so none wait), so a test sees the
    /// refusal a run would give.
    fn change(&self, key: &str, value: Option<&str>) -> Result<(), String> {
        let entry = |v: &str| key.len() + v.len() + VIEW_ENTRY_BYTES;
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let old = held.0.get(key).map_or(0, |v| entry(v));
        let old_text = held.0.get(key).map_or(0, |v| key.len() + v.len());
        let bytes = held.1 - old + value.map_or(0, entry);
        if bytes > self.limit && bytes > held.1 {
            return Err(format!(
                "the connector's state would hold {bytes} bytes in the host ({VIEW_ENTRY_BYTES} bytes a key beside its text), over limits.max_state_mib = {}",
                self.limit >> 20
            ));
        }
        match value {
            Some(value) => held.0.insert(key.to_owned(), value.to_owned()),
            None => held.0.remove(key),
        };
        held.1 = bytes;
        held.2 = held.2 - old_text + value.map_or(0, |v| key.len() + v.len());
        Ok(())
    }

    fn full_sync(&self) -> bool {
        false
    }
}
