//! The indexer's fence against late copies of older versions.
//!
//! A worker that lost its partitions without knowing it yet (a broker
//! restart that forgot the group, a session that expired) can still have
//! outputs in its producer's queue. They reach the destination topic when
//! its producer reconnects, possibly after the partition's new owner has
//! processed the same records again and sent later versions of their ids:
//! indexed as they come, an old version would land after the new one (a
//! delete undone, an update lost).
//!
//! Every document a worker sends carries its source record's place (the
//! `weir.origin` header: partition and offset). Versions of an id share a
//! source partition, so the later version has the higher offset. The fence
//! remembers, for the ids it saw most recently, the highest place indexed
//! in each run, and turns away a copy from a lower place of the same run
//! and partition: a newer version is already in the index, and the copy's
//! record was processed again by the new owner (its offset was not
//! committed), so nothing is lost by not indexing it again.
//!
//! Memory is bounded: two generations of at most [`GENERATION`] ids each
//! (the most recent ids are known; older ones are forgotten), each kept as
//! a 128-bit hash with a per-process random seed, so an entry is a few
//! dozen bytes however long the id (ids have no limit of their own but the
//! document's size) and colliding ids cannot be chosen. Late copies
//! come within seconds of the cluster coming back (the producers' reconnect
//! backoff is capped at a second), far inside that window.

use std::hash::BuildHasher;

use foldhash::HashMap;
use foldhash::quality::RandomState;

/// Ids remembered per generation: between this many and twice as many of
/// the most recent ids are known.
pub(super) const GENERATION: usize = 65_536;

/// Where an id's newest indexed version came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// A hash of the run id: places compare only within one run.
    run: u64,
    partition: i32,
    offset: i64,
}

/// The source record a document was made from: its partition and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) partition: i32,
    pub(super) offset: i64,
}

impl Place {
    /// The header's text form: `partition:offset`.
    pub(super) fn to_header(self) -> String {
        format!("{}:{}", self.partition, self.offset)
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        let (partition, offset) = text.split_once(':')?;
        Some(Self {
            partition: partition.parse().ok()?,
            offset: offset.parse().ok()?,
        })
    }
}

#[derive(Debug)]
pub(super) struct Fence {
    /// Keyed by the ids' 128-bit hashes.
    hot: HashMap<u128, Seen>,
    cold: HashMap<u128, Seen>,
    generation: usize,
    /// Two independent seeds: the halves of an id's hash, and the run's.
    seeds: (RandomState, RandomState),
}

impl Default for Fence {
    fn default() -> Self {
        Self::with_generation(GENERATION)
    }
}

impl Fence {
    pub(super) fn with_generation(generation: usize) -> Self {
        Self {
            hot: HashMap::default(),
            cold: HashMap::default(),
            generation: generation.max(1),
            seeds: (RandomState::default(), RandomState::default()),
        }
    }

    /// Whether a document of `id` in `run` made from the record at `place`
    /// may be indexed; false for a late copy of an older version. A
    /// document without a place (from a worker before the header) or a run
    /// always may.
    pub(super) fn admit(&mut self, id: &str, run: Option<&str>, place: Option<Place>) -> bool {
        let (Some(run), Some(place)) = (run, place) else {
            return true;
        };
        let run = self.seeds.0.hash_one(run);
        let id =
            (u128::from(self.seeds.0.hash_one(id)) << 64) | u128::from(self.seeds.1.hash_one(id));
        let now = Seen {
            run,
            partition: place.partition,
            offset: place.offset,
        };
        let newest = self.hot.get(&id).or_else(|| self.cold.get(&id));
        if let Some(seen) = newest
            && seen.run == now.run
            && seen.partition == now.partition
            && seen.offset > now.offset
        {
            return false;
        }
        if self.hot.len() >= self.generation && !self.hot.contains_key(&id) {
            self.cold = std::mem::take(&mut self.hot);
        }
        self.hot.insert(id, now);
        true
    }

    /// Ids remembered now.
    #[cfg(test)]
    fn known(&self) -> usize {
        self.hot.len() + self.cold.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> Option<Place> {
        Some(Place {
            partition: 2,
            offset,
        })
    }

    #[test]
    fn an_older_version_after_a_newer_one_of_the_same_run_is_turned_away() {
        let mut fence = Fence::default();
        assert!(fence.admit("a", Some("r1"), at(10)));
        assert!(fence.admit("a", Some("r1"), at(20)));
        assert!(!fence.admit("a", Some("r1"), at(10)), "late copy of v1");
        // The same record again (a redelivery in order) is indexed again.
        assert!(fence.admit("a", Some("r1"), at(20)));
        assert!(fence.admit("a", Some("r1"), at(30)));
        // Other ids are not affected.
        assert!(fence.admit("b", Some("r1"), at(5)));
    }

    #[test]
    fn places_compare_only_within_one_run_and_partition() {
        let mut fence = Fence::default();
        assert!(fence.admit("a", Some("r1"), at(20)));
        // Another run (a source topic made again starts at offset 0).
        assert!(fence.admit("a", Some("r2"), at(3)));
        assert!(fence.admit("a", Some("r1"), at(20)));
        // Another partition (the topic's partitions changed).
        let other = Some(Place {
            partition: 5,
            offset: 1,
        });
        assert!(fence.admit("a", Some("r1"), other));
        // Without a place or a run there is nothing to compare.
        assert!(fence.admit("a", None, at(0)));
        assert!(fence.admit("a", Some("r1"), None));
    }

    #[test]
    fn memory_is_two_generations_of_the_most_recent_ids() {
        let mut fence = Fence::with_generation(100);
        for n in 0..1_000 {
            assert!(fence.admit(&format!("id-{n}"), Some("r"), at(n)));
            assert!(fence.known() <= 200);
        }
        // The last 100 are surely known...
        assert!(!fence.admit("id-999", Some("r"), at(0)));
        assert!(!fence.admit("id-900", Some("r"), at(0)));
        // ...the oldest are forgotten (admitted: no newer version is known).
        assert!(fence.admit("id-0", Some("r"), at(-1)));
        // An id seen again in the cold generation is kept into the hot one.
        let mut fence = Fence::with_generation(2);
        assert!(fence.admit("x", Some("r"), at(50)));
        assert!(fence.admit("y", Some("r"), at(1)));
        assert!(fence.admit("z", Some("r"), at(1))); // x and y go cold
        assert!(
            !fence.admit("x", Some("r"), at(40)),
            "still known while cold"
        );
    }

    #[test]
    fn a_long_id_is_known_by_its_hash() {
        let mut fence = Fence::default();
        let long = "x".repeat(4 << 20);
        assert!(fence.admit(&long, Some("r"), at(9)));
        assert!(!fence.admit(&long, Some("r"), at(8)));
        // One character apart: another id.
        let other = format!("{}y", &long[1..]);
        assert!(fence.admit(&other, Some("r"), at(1)));
        assert_eq!(fence.known(), 2);
    }

    #[test]
    fn places_round_trip_through_their_header() {
        let place = Place {
            partition: 7,
            offset: 123_456_789_012,
        };
        assert_eq!(Place::parse(&place.to_header()), Some(place));
        for bad in ["", "7", "7:", ":1", "a:1", "1:b", "1:2:3"] {
            assert_eq!(Place::parse(bad), None, "{bad:?}");
        }
    }
}
