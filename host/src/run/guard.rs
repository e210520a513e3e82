//! The mass-delete guard: a syncing connector's deletion markers are held
//! in the host until its `execute` returns, and a run that makes more of
//! them than its share of what its state knew is refused, none of its
//! markers sent.
//!
//! A run may delete `max(10, share × keys)` documents, where `keys` is how
//! many keys the connector's state held as its `execute` began and `share`
//! is `[state] max_delete_share` (`weir run --allow-deletes` makes it 1,
//! and nothing is held). The marker past that stops the run with a
//! [`MassDelete`]. A connector that deletes more ids than its state held
//! keys does not decide its deletes from that state (a SQL cursor with soft
//! deletes, say): the guard cannot judge it, sends what it held and holds
//! nothing more.
//!
//! A held marker takes its place among the connector's publications when
//! it is made: it is pending from then on, so a state change the connector
//! makes after it (the removal of the deleted item's key) is committed only
//! once the marker is done, and never when the run is refused or killed
//! first. Markers are sent in the order made when `execute` returns, before
//! anything else the host sends for the run; a marker of an id the
//! connector publishes again is sent just before that publication, so each
//! id's versions keep their order. At most the limit is held.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::core::document::Document;

/// Deletes any run may make, whatever its state held.
pub const MIN_DELETES: u64 = 10;

/// A run the mass-delete guard stopped: what it would have deleted, and
/// what it may.
#[derive(Debug, Clone, PartialEq)]
pub struct MassDelete {
    /// Deletion markers the run had made when it was stopped: one more
    /// than `limit`.
    pub deletes: u64,
    /// The most one run may make: `max(10, share × keys)`.
    pub limit: u64,
    /// Keys the connector's state held as the run began.
    pub keys: u64,
    /// `[state] max_delete_share`.
    pub share: f64,
    /// Markers sent anyway, each just before a new version of its
    /// document: only those reached the indexer.
    pub sent: u64,
}

/// The share is a checked number from 0 to 1, never NaN.
impl Eq for MassDelete {}

impl std::fmt::Display for MassDelete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            deletes,
            limit,
            keys,
            share,
            sent,
        } = self;
        write!(
            f,
            "refused by the mass-delete guard: this run would delete more than {limit} documents ({deletes} deletion markers made; its state held {keys} keys as the run began, and [state] max_delete_share = {share} lets one run delete max({MIN_DELETES}, {share} x {keys}) = {limit}); "
        )?;
        if *sent == 0 {
            f.write_str("none of its deletes reached the indexer")?;
        } else {
            write!(
                f,
                "only the {sent} deletes followed by a new version of their document were sent"
            )?;
        }
        f.write_str(", and the state keeps what it knew. If the source really lost them, run again with `weir run --allow-deletes`, or raise [state] max_delete_share")
    }
}

/// One syncing connector's deletion markers for one run.
#[derive(Debug)]
pub(crate) struct Guard {
    limit: u64,
    keys: u64,
    share: f64,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    /// Markers not yet sent, by the number each was made with.
    markers: BTreeMap<u64, Document>,
    /// Per id, the numbers of its markers held.
    ids: foldhash::HashMap<String, Vec<u64>>,
    /// Markers made this run (held, sent or refused).
    made: u64,
    /// Markers sent before `execute` returned.
    sent: u64,
    /// More markers than the state held keys: the guard cannot judge the
    /// run, and holds nothing.
    unjudged: bool,
    /// The run was refused: nothing more is held or sent.
    refused: bool,
}

/// What becomes of a deletion marker the connector made.
#[derive(Debug)]
pub(crate) enum Hold {
    /// Held, to be sent when `execute` returns.
    Held,
    /// To be sent now (the second), after these markers held before it.
    Send(Vec<Document>, Document),
    /// The run is over its limit: refused, and the markers held dropped.
    Refused(MassDelete, Vec<Document>),
}

impl Guard {
    /// The guard of a connector whose state held `keys` keys as its run
    /// began, under `share`; none when a run may delete everything (a share
    /// of 1 or more: `--allow-deletes`).
    pub(crate) fn new(keys: u64, share: f64) -> Option<Self> {
        if share.is_nan() || share >= 1.0 {
            return None;
        }
        // A share from 0 to 1 of a key count: a count again.
        let allowed = (share.max(0.0) * keys as f64).floor() as u64;
        Some(Self {
            limit: allowed.max(MIN_DELETES),
            keys,
            share,
            held: Mutex::default(),
        })
    }

    /// The guard of a syncing connector's run (one with `state`), under
    /// `share`.
    pub(crate) fn for_run(state: Option<&super::state::Ledger>, share: f64) -> Option<Arc<Self>> {
        use crate::plugin::ConnectorState;
        let keys = state?.size().0;
        Self::new(keys, share).map(Arc::new)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most one run may delete.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// The connector made `marker`: hold it (calling `take_place` first,
    /// under the guard's lock, so markers are held in the order of their
    /// places), or say to send it, or refuse the run.
    pub(crate) fn hold(&self, marker: Document, take_place: impl FnOnce()) -> Hold {
        let mut held = self.held();
        if held.refused {
            return Hold::Refused(self.refusal(&held), Vec::new());
        }
        held.made += 1;
        if held.unjudged {
            return Hold::Send(Vec::new(), marker);
        }
        if held.made > self.keys && held.made > self.limit {
            // More deletes than keys: not a diff against the state.
            held.unjudged = true;
            held.ids.clear();
            let earlier = std::mem::take(&mut held.markers).into_values().collect();
            return Hold::Send(earlier, marker);
        }
        if held.made > self.limit {
            held.refused = true;
            held.ids.clear();
            let dropped = std::mem::take(&mut held.markers).into_values().collect();
            return Hold::Refused(self.refusal(&held), dropped);
        }
        take_place();
        let number = held.made;
        held.ids
            .entry(marker.id().to_owned())
            .or_default()
            .push(number);
        held.markers.insert(number, marker);
        Hold::Held
    }

    fn refusal(&self, held: &Held) -> MassDelete {
        MassDelete {
            deletes: held.made,
            limit: self.limit,
            keys: self.keys,
            share: self.share,
            sent: held.sent,
        }
    }

    /// The markers of `id` held, in order: to be sent before the connector
    /// publishes `id` again.
    pub(crate) fn take_id(&self, id: &str) -> Vec<Document> {
        let mut held = self.held();
        let Some(numbers) = held.ids.remove(id) else {
            return Vec::new();
        };
        held.sent += numbers.len() as u64;
        numbers
            .into_iter()
            .filter_map(|n| held.markers.remove(&n))
            .collect()
    }

    /// Every marker held, in the order made: `execute` returned.
    pub(crate) fn take_all(&self) -> Vec<Document> {
        let mut held = self.held();
        held.ids.clear();
        std::mem::take(&mut held.markers).into_values().collect()
    }

    /// Markers held now.
    #[cfg(test)]
    fn holding(&self) -> usize {
        self.held().markers.len()
    }
}

impl super::Runner {
    /// The largest share of what a syncing connector's state knew that one
    /// run may delete: `[state] max_delete_share`, or 1 with
    /// `--allow-deletes`.
    pub(crate) fn delete_share(&self) -> f64 {
        if self.allow_deletes {
            1.0
        } else {
            self.config.state.max_delete_share
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(id: &str) -> Document {
        let mut doc = Document::new(id);
        doc.set_deleted(true);
        doc
    }

    #[test]
    fn the_limit_is_the_share_of_the_keys_and_at_least_ten() {
        assert_eq!(Guard::new(1000, 0.5).map(|g| g.limit()), Some(500));
        assert_eq!(Guard::new(7, 0.5).map(|g| g.limit()), Some(10));
        assert_eq!(Guard::new(1000, 0.0).map(|g| g.limit()), Some(10));
        assert_eq!(Guard::new(999, 0.25).map(|g| g.limit()), Some(249));
        assert!(
            Guard::new(1000, 1.0).is_none(),
            "--allow-deletes holds nothing"
        );
    }

    #[test]
    fn markers_are_held_in_order_until_the_limit_then_the_run_is_refused() {
        let guard = Guard::new(40, 0.5).expect("a guard");
        assert_eq!(guard.limit(), 20);
        let mut places = 0;
        for n in 0..20 {
            let held = guard.hold(marker(&format!("d{n:02}")), || places += 1);
            assert!(matches!(held, Hold::Held), "{held:?}");
        }
        assert_eq!((guard.holding(), places), (20, 20));
        match guard.hold(marker("d20"), || places += 1) {
            Hold::Refused(refusal, dropped) => {
                assert_eq!(dropped.len(), 20, "the markers held are dropped");
                assert_eq!(
                    (refusal.deletes, refusal.limit, refusal.keys, refusal.sent),
                    (21, 20, 40, 0)
                );
                let message = refusal.to_string();
                for part in [
                    "more than 20",
                    "21 deletion markers",
                    "40 keys",
                    "[state] max_delete_share = 0.5",
                    "--allow-deletes",
                    "none of its deletes reached the indexer",
                ] {
                    assert!(message.contains(part), "{part}: {message}");
                }
            }
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(places, 20, "the refused marker takes no place");
        assert_eq!(guard.holding(), 0, "nothing held is sent");
        assert!(guard.take_all().is_empty());
        assert!(matches!(
            guard.hold(marker("d21"), || ()),
            Hold::Refused(_, dropped) if dropped.is_empty()
        ));
    }

    #[test]
    fn a_new_version_of_an_id_takes_its_markers_out_first() {
        let guard = Guard::new(100, 0.5).expect("a guard");
        for id in ["a", "b", "a", "c"] {
            assert!(matches!(guard.hold(marker(id), || ()), Hold::Held));
        }
        let a = guard.take_id("a");
        assert_eq!(a.len(), 2);
        assert!(guard.take_id("a").is_empty());
        let rest: Vec<String> = guard.take_all().iter().map(|d| d.id().to_owned()).collect();
        assert_eq!(rest, ["b", "c"], "the rest, in the order made");
    }

    #[test]
    fn more_deletes_than_keys_are_not_judged() {
        // A cursor's one key: deletes come from the source, not a diff.
        let guard = Guard::new(1, 0.5).expect("a guard");
        for n in 0..10 {
            assert!(matches!(
                guard.hold(marker(&n.to_string()), || ()),
                Hold::Held
            ));
        }
        match guard.hold(marker("10"), || ()) {
            Hold::Send(earlier, _) => assert_eq!(earlier.len(), 10),
            other => panic!("{other:?}"),
        }
        assert!(matches!(guard.hold(marker("11"), || ()), Hold::Send(e, _) if e.is_empty()));
        assert_eq!(guard.holding(), 0);
    }
}
