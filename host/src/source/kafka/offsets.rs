//! Which offsets of each partition a Kafka source may commit: a record is
//! pending from its delivery until it is settled (its documents done, or
//! it was rejected); a partition's committable offset is its first record
//! still pending, else one past the highest settled. Only records in flight
//! are held.
//!
//! A partition revoked (a rebalance) is forgotten with what it had pending:
//! its new owner reads again from the committed offset. Its records settled
//! later are no longer ours and change nothing (each ownership is an epoch
//! of its own).

use std::collections::BTreeSet;

/// A partition: its topic and its number.
pub(super) type Partition = (String, i32);

#[derive(Debug, Default)]
struct Track {
    pending: BTreeSet<i64>,
    highest_done: Option<i64>,
    /// The offset committed last (or being committed).
    committed: Option<i64>,
    epoch: u64,
}

impl Track {
    fn committable(&self) -> Option<i64> {
        match self.pending.first() {
            Some(&first) => Some(first),
            None => self.highest_done.map(|o| o + 1),
        }
    }
}

/// What each delivery token stands for: a partition (by its place in
/// `Offsets::names`), an offset, the partition's ownership.
#[derive(Debug, Clone, Copy)]
struct Held {
    partition: usize,
    offset: i64,
    epoch: u64,
}

/// The records of one source in flight, by partition and by token.
#[derive(Debug, Default)]
pub(super) struct Offsets {
    /// Every partition seen, once each (a token names one by its place).
    names: Vec<Partition>,
    tracks: foldhash::HashMap<usize, Track>,
    tokens: foldhash::HashMap<u64, Held>,
    next_token: u64,
    epochs: u64,
}

impl Offsets {
    /// The place of `topic`'s `partition` in `names`, added when new.
    fn place(&mut self, topic: &str, partition: i32) -> usize {
        // A grant reads a few topics: a scan of their partitions, no
        // allocation per record.
        match self
            .names
            .iter()
            .position(|(t, p)| *p == partition && t == topic)
        {
            Some(place) => place,
            None => {
                self.names.push((topic.to_owned(), partition));
                self.names.len() - 1
            }
        }
    }

    /// Record `offset` of `partition` of `topic` was delivered: its token.
    pub(super) fn delivered(&mut self, topic: &str, partition: i32, offset: i64) -> u64 {
        let place = self.place(topic, partition);
        let epochs = &mut self.epochs;
        let track = self.tracks.entry(place).or_insert_with(|| {
            *epochs += 1;
            Track {
                epoch: *epochs,
                ..Track::default()
            }
        });
        track.pending.insert(offset);
        self.next_token += 1;
        self.tokens.insert(
            self.next_token,
            Held {
                partition: place,
                offset,
                epoch: track.epoch,
            },
        );
        self.next_token
    }

    /// Delivery `token` is settled: no longer pending. False when it is not
    /// ours (settled already, or its partition was revoked).
    pub(super) fn settled(&mut self, token: u64) -> bool {
        let Some(held) = self.tokens.remove(&token) else {
            return false;
        };
        match self.tracks.get_mut(&held.partition) {
            Some(track) if track.epoch == held.epoch => {
                track.pending.remove(&held.offset);
                track.highest_done = Some(
                    track
                        .highest_done
                        .map_or(held.offset, |h| h.max(held.offset)),
                );
                true
            }
            _ => false,
        }
    }

    /// The offsets to commit now: each partition whose committable offset
    /// moved since its last commit (taken as committed).
    pub(super) fn due(&mut self) -> Vec<(Partition, i64)> {
        let mut due = Vec::new();
        for (&place, track) in &mut self.tracks {
            if let Some(offset) = track.committable()
                && track.committed.is_none_or(|c| c < offset)
            {
                track.committed = Some(offset);
                due.push((self.names[place].clone(), offset));
            }
        }
        due
    }

    /// Every partition's committable offset, committed before or not (the
    /// last commit, as the source closes).
    pub(super) fn all(&self) -> Vec<(Partition, i64)> {
        self.tracks
            .iter()
            .filter_map(|(&place, track)| Some((self.names[place].clone(), track.committable()?)))
            .collect()
    }

    /// `partitions` are revoked: the offsets to commit for them (what is
    /// done), and they are forgotten with what they had pending.
    pub(super) fn revoke(&mut self, partitions: &[Partition]) -> Vec<(Partition, i64)> {
        let mut due = Vec::new();
        let mut abandoned = 0usize;
        let mut places = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let Some(place) = self.names.iter().position(|name| name == partition) else {
                continue;
            };
            places.push(place);
            if let Some(track) = self.tracks.remove(&place) {
                abandoned += track.pending.len();
                if let Some(offset) = track.committable()
                    && track.committed.is_none_or(|c| c < offset)
                {
                    due.push((partition.clone(), offset));
                }
            }
        }
        if abandoned > 0 {
            self.tokens
                .retain(|_, held| !places.contains(&held.partition));
            tracing::info!(
                abandoned,
                "records of revoked partitions left to their new owner"
            );
        }
        due
    }

    /// Records in flight.
    pub(super) fn in_flight(&self) -> usize {
        self.tokens.len()
    }

    /// Partitions tracked.
    #[cfg(test)]
    pub(super) fn partitions(&self) -> usize {
        self.tracks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: i32) -> Partition {
        ("orders".into(), n)
    }

    #[test]
    fn a_partition_commits_up_to_its_first_record_pending() {
        let mut offsets = Offsets::default();
        let t: Vec<u64> = (10..14)
            .map(|o| offsets.delivered("orders", 0, o))
            .collect();
        // Where the partition starts again: its first record pending.
        assert_eq!(offsets.due(), [(p(0), 10)]);
        assert!(offsets.settled(t[1]));
        assert!(offsets.settled(t[2]));
        assert!(offsets.due().is_empty(), "10 is pending still");
        assert!(offsets.settled(t[0]));
        assert_eq!(offsets.due(), [(p(0), 13)]);
        assert!(offsets.settled(t[3]));
        assert_eq!(offsets.due(), [(p(0), 14)]);
        assert!(!offsets.settled(t[3]), "once");
        assert_eq!(offsets.in_flight(), 0);
    }

    #[test]
    fn a_revoked_partition_commits_what_is_done_and_forgets_the_rest() {
        let mut offsets = Offsets::default();
        let a = offsets.delivered("orders", 0, 5);
        let b = offsets.delivered("orders", 0, 6);
        let c = offsets.delivered("orders", 1, 0);
        offsets.settled(a);
        assert_eq!(offsets.revoke(&[p(0)]), [(p(0), 6)]);
        assert_eq!(offsets.in_flight(), 1, "p1's record only");
        assert!(!offsets.settled(b), "no longer ours");
        // Assigned again: a new ownership, its own offsets.
        let d = offsets.delivered("orders", 0, 6);
        assert!(offsets.settled(d));
        assert!(offsets.settled(c));
        let mut due = offsets.due();
        due.sort();
        assert_eq!(due, [(p(0), 7), (p(1), 1)]);
        assert_eq!(offsets.partitions(), 2);
    }
}
