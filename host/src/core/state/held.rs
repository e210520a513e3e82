//! A connector's state as the host holds it, and the one check of
//! `limits.max_state_mib`: what the connector sees (its committed state with
//! its own changes over it) and the changes not yet committed, each counted
//! as the host spends it ([`VIEW_ENTRY_BYTES`] a key, [`CHANGE_ENTRY_BYTES`]
//! a change, beside their text). A run's ledger (`run/state`) and `weir
//! test`'s state (`testing/state.rs`) both keep their state here, so a test
//! refuses what a run refuses.

use std::collections::{BTreeMap, VecDeque};

use super::{CHANGE_ENTRY_BYTES, StateChange, StateError, VIEW_ENTRY_BYTES};
use crate::core::limit::Limit;
use crate::core::text::for_log;

/// The bytes the host holds for a key of the view.
fn view_entry(key: &str, value: &str) -> usize {
    key.len() + value.len() + VIEW_ENTRY_BYTES
}

/// The bytes the host holds for a change of `key` to `value`.
fn change_entry(key: &str, value: Option<&str>) -> usize {
    key.len() + value.map_or(0, str::len) + CHANGE_ENTRY_BYTES
}

/// One change not yet committed.
#[derive(Debug)]
pub struct Change {
    /// Its number among the changes, new whenever it is made or replaced:
    /// a commit removes only the changes it handed the store, by number,
    /// so one replaced while the store wrote it stays.
    pub seq: u64,
    /// How many documents the connector had published when it was made:
    /// it waits for every document before that position to be done.
    pub position: u64,
    pub key: String,
    pub value: Option<String>,
}

impl Change {
    /// The bytes the host holds for it.
    fn bytes(&self) -> usize {
        change_entry(&self.key, self.value.as_deref())
    }
}

/// A connector's view and its changes not yet committed, bounded together.
#[derive(Debug, Default)]
pub struct HeldState {
    /// What `get` sees.
    pub view: BTreeMap<String, String>,
    /// Bytes of the view's keys and values, as `size` answers.
    pub view_text: usize,
    /// Bytes the host holds for the view (its text and each entry's cost).
    view_bytes: usize,
    /// Changes not yet committed, in position order.
    pub changes: VecDeque<Change>,
    /// Bytes the host holds for them.
    changes_bytes: usize,
    /// The number the next change gets.
    next_seq: u64,
}

impl HeldState {
    /// Take in one change of the state being loaded, refusing it when the
    /// view would hold more than `limit` bytes (what the host spends, as a
    /// change is counted), naming its key.
    pub fn load(&mut self, (key, value): StateChange, limit: usize) -> Result<(), StateError> {
        let old = self.view.get(&key);
        let old_text = old.map_or(0, |v| key.len() + v.len());
        let old_bytes = old.map_or(0, |v| view_entry(&key, v));
        let new_bytes = value.as_deref().map_or(0, |v| view_entry(&key, v));
        let bytes = self.view_bytes - old_bytes + new_bytes;
        if bytes > limit {
            return Err(StateError::new(format!(
                "it holds more than {} = {} as the host counts it (each key's key and value and {VIEW_ENTRY_BYTES} bytes a key): {bytes} bytes with {} keys read when key `{}` came; it was kept under a larger limit or changed by hand: raise the limit, or clear the state (its connector then sends everything again)",
                Limit::MaxStateMib,
                limit >> 20,
                self.view.len() + usize::from(old.is_none()),
                for_log(&key),
            )));
        }
        self.view_text =
            self.view_text - old_text + value.as_ref().map_or(0, |v| key.len() + v.len());
        self.view_bytes = bytes;
        match value {
            Some(value) => self.view.insert(key, value),
            None => self.view.remove(&key),
        };
        Ok(())
    }

    /// Set (`Some`) or remove (`None`) `key`, the change waiting at
    /// `position`, unless the view and the changes would then hold more
    /// than `limit` bytes together: the one check of the state bound. The
    /// queue stays in position order: a change made for an earlier position
    /// goes before those made after it, and one made at the same position
    /// as the last one of its key replaces it (they would be committed
    /// together).
    pub fn change_at(
        &mut self,
        key: &str,
        value: Option<&str>,
        position: u64,
        limit: usize,
    ) -> Result<(), String> {
        let old = self.view.get(key);
        let old_text = old.map_or(0, |v| key.len() + v.len());
        let old_bytes = old.map_or(0, |v| view_entry(key, v));
        let new_key = old.is_none() && value.is_some();
        let new_text = value.map_or(0, |v| key.len() + v.len());
        let new_bytes = value.map_or(0, |v| view_entry(key, v));
        let at = self.changes.partition_point(|c| c.position <= position);
        let last = at
            .checked_sub(1)
            .and_then(|i| self.changes.get(i))
            .filter(|c| c.position == position && c.key == key);
        let replaces = last.is_some();
        let replaced_bytes = last.map_or(0, Change::bytes);
        let change_bytes = change_entry(key, value);
        let view_bytes = self.view_bytes - old_bytes + new_bytes;
        let changes_bytes = self.changes_bytes - replaced_bytes + change_bytes;
        let total = view_bytes + changes_bytes;
        // Checked before anything is taken in. A change that does not grow
        // what is held (a removal, a shorter value) is let through even
        // over the limit (state loaded near it leaves little room for the
        // changes' own cost): it is how a connector gets back under it.
        if total > limit && total > self.view_bytes + self.changes_bytes {
            // A run that never ends, its documents slow to finish, gathers
            // a change per document: thinned to each key's last, it goes on.
            if self.thin() > 0 {
                return self.change_at(key, value, position, limit);
            }
            return Err(format!(
                "the connector's state would hold {total} bytes in the host ({} keys: their keys and values and {VIEW_ENTRY_BYTES} bytes a key, {view_bytes}; the changes not yet committed, {CHANGE_ENTRY_BYTES} bytes each beside their text, {changes_bytes}), over {} = {}",
                self.view.len() + usize::from(new_key),
                Limit::MaxStateMib,
                limit >> 20
            ));
        }
        match value {
            Some(value) => self.view.insert(key.to_owned(), value.to_owned()),
            None => self.view.remove(key),
        };
        self.view_text = self.view_text - old_text + new_text;
        self.view_bytes = view_bytes;
        self.changes_bytes = changes_bytes;
        let seq = self.next_seq;
        self.next_seq += 1;
        let change = Change {
            seq,
            position,
            key: key.to_owned(),
            value: value.map(str::to_owned),
        };
        if replaces {
            self.changes[at - 1] = change;
        } else {
            self.changes.insert(at, change);
        }
        Ok(())
    }

    /// Keep only the last change waiting of each key: a key then keeps its
    /// older committed value until its last change's documents are done,
    /// which is safe (after a crash, more is sent again; nothing is lost).
    /// How many changes were dropped.
    fn thin(&mut self) -> usize {
        let before = self.changes.len();
        let mut seen = std::collections::HashSet::new();
        let mut kept = VecDeque::with_capacity(before);
        for change in std::mem::take(&mut self.changes).into_iter().rev() {
            if seen.insert(change.key.clone()) {
                kept.push_front(change);
            } else {
                self.changes_bytes -= change.bytes();
            }
        }
        self.changes = kept;
        before - self.changes.len()
    }

    /// Up to `most` changes made at `watermark` or before, in order, with
    /// their numbers (to hand to [`written`](Self::written) once stored).
    pub fn ready(&self, watermark: u64, most: usize) -> (Vec<StateChange>, Vec<u64>) {
        self.changes
            .iter()
            .take_while(|c| c.position <= watermark)
            .take(most)
            .map(|c| ((c.key.clone(), c.value.clone()), c.seq))
            .unzip()
    }

    /// The changes numbered `written` were committed: those still first in
    /// the queue as they were copied (a change replaced meanwhile has a new
    /// number, and stays) no longer count. How many were removed.
    pub fn written(&mut self, written: impl IntoIterator<Item = u64>) -> u64 {
        let mut removed = 0u64;
        for seq in written {
            let Some(change) = self.changes.pop_front_if(|c| c.seq == seq) else {
                break;
            };
            self.changes_bytes -= change.bytes();
            removed += 1;
        }
        if self.changes.len() * 4 < self.changes.capacity() {
            self.changes.shrink_to_fit();
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound counts the changes waiting beside the view: room for three
    /// keys and two changes holds two keys whose changes wait, not a third.
    #[test]
    fn waiting_changes_count_toward_the_bound() {
        let limit = 3 * (1 + VIEW_ENTRY_BYTES) + 2 * (1 + CHANGE_ENTRY_BYTES);
        let mut held = HeldState::default();
        held.change_at("a", Some(""), 0, limit).expect("within");
        held.change_at("b", Some(""), 0, limit).expect("within");
        let error = held.change_at("c", Some(""), 0, limit).expect_err("over");
        assert!(error.contains("limits.max_state_mib"), "{error}");
        // The same key at the same position replaces its change.
        held.change_at("b", Some(""), 0, limit)
            .expect("a replacement");
        // Committed, the changes no longer count: c fits.
        let (_, seqs) = held.ready(0, 10);
        assert_eq!(held.written(seqs), 2);
        held.change_at("c", Some(""), 1, limit).expect("fits now");
    }

    /// A cursor set after every document while the first is still in
    /// flight: at the bound, its changes are thinned to the last, and the
    /// connector goes on; the commit then keeps the older value until the
    /// last change's documents are done.
    #[test]
    fn changes_of_one_key_past_the_bound_are_thinned_to_the_last() {
        let change = 6 + CHANGE_ENTRY_BYTES;
        let limit = 2 * (6 + VIEW_ENTRY_BYTES) + 10 * change;
        let mut held = HeldState::default();
        for n in 1..=1000u64 {
            held.change_at("cursor", Some(&format!("{:05}", n % 100_000)), n, limit)
                .expect("thinned, never refused");
            assert!(held.changes.len() <= 20, "{} changes", held.changes.len());
        }
        assert_eq!(held.view.get("cursor").map(String::as_str), Some("01000"));
        // Nothing is ready before its documents are done; the last is.
        let (ready, _) = held.ready(500, 100);
        assert!(
            ready.iter().all(|(_, v)| v.as_deref() <= Some("00500")),
            "{ready:?}"
        );
        let (ready, _) = held.ready(1000, 100);
        assert_eq!(ready.last().map(|(_, v)| v.as_deref()), Some(Some("01000")));
        // Distinct keys cannot be thinned: the bound still refuses.
        let mut keys = HeldState::default();
        let error = (0..100)
            .find_map(|n| {
                keys.change_at(&format!("k{n:05}"), Some(""), n, limit)
                    .err()
            })
            .expect("refused at the bound");
        assert!(error.contains("limits.max_state_mib"), "{error}");
    }
}
