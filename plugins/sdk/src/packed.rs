//! Indexer batches as `index-packed` hands them over (contract 0.2.1): the
//! text of every entry in one string, cut up by a list of lengths. This
//! reads them in place: an [`Entry`] borrows its id, run id, JSON text and
//! picked values from the batch, with no string of its own.

use crate::bindings::indexer::exports::weir::plugin::indexer_packed_api::PackedBatch;
use crate::{BatchEntry, BatchError, batch_error};

/// The length that marks an absent piece (no run id, no JSON text).
const ABSENT: u32 = u32::MAX;

/// A packed batch, read: [`Packed::entries`] in order.
pub struct Packed<'a> {
    heads: Vec<Head<'a>>,
    /// Every picked value of the batch, entry after entry, field after field.
    values: Vec<&'a str>,
    /// Where each entry's picked fields end in `values`, `fields` per entry.
    ends: Vec<u32>,
    fields: usize,
}

/// An entry's id, run id and JSON text.
struct Head<'a> {
    id: &'a str,
    run_id: Option<&'a str>,
    json: Option<&'a str>,
}

/// One entry of a packed batch, borrowed from it: what a [`BatchEntry`]
/// holds.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'p, 'a> {
    pub id: &'a str,
    pub run_id: Option<&'a str>,
    /// The document as JSON text, shaped as the batch format asked; none
    /// when it did not ask for JSON.
    pub json: Option<&'a str>,
    values: &'p [&'a str],
    ends: &'p [u32],
    /// Where this entry's values start in the batch's.
    start: u32,
}

impl<'p, 'a> Entry<'p, 'a> {
    /// The values of picked field `at` (its place in the batch format's
    /// `pick`) as text: empty when absent, or past the fields picked.
    pub fn picked(&self, at: usize) -> &'p [&'a str] {
        let Some(&end) = self.ends.get(at) else {
            return &[];
        };
        let start = match at {
            0 => self.start,
            _ => self.ends[at - 1],
        };
        self.values
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// This entry as an owned [`BatchEntry`].
    pub fn to_entry(&self) -> BatchEntry {
        BatchEntry {
            id: self.id.to_owned(),
            run_id: self.run_id.map(str::to_owned),
            json: self.json.map(str::to_owned),
            picked: (0..self.ends.len())
                .map(|at| self.picked(at).iter().map(|v| (*v).to_owned()).collect())
                .collect(),
        }
    }
}

impl<'a> Packed<'a> {
    /// Read `batch`, whose entries pick `fields` fields each. A batch whose
    /// lengths do not cut its text as the contract says is refused whole.
    pub fn read(batch: &'a PackedBatch, fields: usize) -> Result<Self, BatchError> {
        let malformed = || batch_error("the host sent a malformed packed batch");
        let count = batch.count as usize;
        let mut text = Cutter {
            text: &batch.text,
            lengths: batch.lengths.iter(),
        };
        let mut packed = Packed {
            heads: Vec::with_capacity(count),
            values: Vec::with_capacity(count * fields),
            ends: Vec::with_capacity(count * fields),
            fields,
        };
        for _ in 0..count {
            let id = text.next().flatten().ok_or_else(malformed)?;
            let run_id = text.next().ok_or_else(malformed)?;
            let json = text.next().ok_or_else(malformed)?;
            packed.heads.push(Head { id, run_id, json });
            for _ in 0..fields {
                let n = text.length().ok_or_else(malformed)?;
                for _ in 0..n {
                    let value = text.next().flatten().ok_or_else(malformed)?;
                    packed.values.push(value);
                }
                let end = u32::try_from(packed.values.len()).map_err(|_| malformed())?;
                packed.ends.push(end);
            }
        }
        if text.lengths.next().is_some() || !text.text.is_empty() {
            return Err(malformed());
        }
        Ok(packed)
    }

    /// How many entries the batch holds.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// The entries, in order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = Entry<'_, 'a>> {
        self.heads.iter().enumerate().map(|(i, head)| {
            let first = i * self.fields;
            let ends = &self.ends[first..first + self.fields];
            // Where the entry before ended (none before the first, and
            // entries of no picked fields have no values).
            let start = first.checked_sub(1).map_or(0, |before| self.ends[before]);
            Entry {
                id: head.id,
                run_id: head.run_id,
                json: head.json,
                values: &self.values,
                ends,
                start,
            }
        })
    }

    /// The entries as owned [`BatchEntry`]s, for [`crate::Indexer::index_batch`].
    pub fn to_entries(&self) -> Vec<BatchEntry> {
        self.entries().map(|e| e.to_entry()).collect()
    }
}

/// Cuts a batch's text by its lengths, piece after piece.
struct Cutter<'a, I> {
    text: &'a str,
    lengths: I,
}

impl<'a, I: Iterator<Item = &'a u32>> Cutter<'a, I> {
    /// The next length as a count.
    fn length(&mut self) -> Option<u32> {
        self.lengths.next().copied()
    }

    /// The next piece: `Some(None)` when it is absent, `None` when the
    /// lengths or the text run out, or a piece ends inside a character.
    fn next(&mut self) -> Option<Option<&'a str>> {
        let length = self.length()?;
        if length == ABSENT {
            return Some(None);
        }
        let length = length as usize;
        if !self.text.is_char_boundary(length) {
            return None;
        }
        let (piece, rest) = self.text.split_at(length);
        self.text = rest;
        Some(Some(piece))
    }
}

#[cfg(test)]
mod tests {
    use super::{ABSENT, Packed, PackedBatch};

    /// A batch of `pieces` (a count is given as its decimal text, `None`
    /// is absent), packed as the host packs it.
    fn batch(count: u32, pieces: &[Option<&str>], counts: &[usize]) -> PackedBatch {
        let mut text = String::new();
        let mut lengths = Vec::new();
        let mut counts = counts.iter();
        for piece in pieces {
            match piece {
                Some("#") => lengths.push(*counts.next().expect("a count") as u32),
                Some(piece) => {
                    text.push_str(piece);
                    lengths.push(piece.len() as u32);
                }
                None => lengths.push(ABSENT),
            }
        }
        PackedBatch {
            count,
            text,
            lengths,
        }
    }

    #[test]
    fn entries_read_back_with_their_picked_values() {
        let b = batch(
            2,
            &[
                Some("a"),
                None,
                Some(r#"{"id":"a"}"#),
                Some("#"),
                Some("é"),
                Some("x|y"),
                Some("#"),
                Some("b"),
                Some("run"),
                None,
                Some("#"),
                Some("#"),
                Some("1"),
            ],
            &[2, 0, 0, 1],
        );
        let packed = Packed::read(&b, 2).expect("read");
        let entries: Vec<_> = packed.entries().collect();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            (entries[0].id, entries[0].run_id, entries[0].json),
            ("a", None, Some(r#"{"id":"a"}"#))
        );
        assert_eq!(entries[0].picked(0), ["é", "x|y"]);
        assert!(entries[0].picked(1).is_empty());
        assert_eq!((entries[1].id, entries[1].run_id), ("b", Some("run")));
        assert!(entries[1].picked(0).is_empty());
        assert_eq!(entries[1].picked(1), ["1"]);
        assert!(entries[1].picked(2).is_empty(), "past the fields picked");
        let owned = packed.to_entries();
        assert_eq!(
            owned[0].picked,
            [vec!["é".to_owned(), "x|y".to_owned()], vec![]]
        );
        assert_eq!(owned[1].run_id.as_deref(), Some("run"));
    }

    #[test]
    fn entries_of_no_picked_fields_read_back_whatever_their_number() {
        let pieces: Vec<Option<&str>> = ["a", "b", "c"]
            .iter()
            .flat_map(|id| [Some(*id), None, Some("{}")])
            .collect();
        let b = batch(3, &pieces, &[]);
        let packed = Packed::read(&b, 0).expect("read");
        let ids: Vec<&str> = packed.entries().map(|e| e.id).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(packed.entries().all(|e| e.picked(0).is_empty()));
    }

    #[test]
    fn a_batch_its_lengths_do_not_cut_is_refused() {
        let whole = batch(1, &[Some("a"), None, None, Some("#"), Some("v")], &[1]);
        assert!(Packed::read(&whole, 1).is_ok());
        let refused = |b: PackedBatch, fields: usize| {
            let e = Packed::read(&b, fields).err().expect("refused");
            assert!(e.message.contains("malformed"), "{}", e.message);
        };
        // More entries than lengths; text left over; lengths left over.
        refused(
            batch(2, &[Some("a"), None, None, Some("#"), Some("v")], &[1]),
            1,
        );
        let mut long = batch(1, &[Some("a"), None, None], &[]);
        long.text.push('x');
        refused(long, 0);
        let mut more = batch(1, &[Some("a"), None, None], &[]);
        more.lengths.push(1);
        refused(more, 0);
        // A count missing, a length past the text, one inside a character,
        // an absent id.
        refused(batch(1, &[Some("a"), None, None], &[]), 1);
        let mut past = batch(1, &[Some("a"), None, None], &[]);
        past.lengths[0] = 5;
        refused(past, 0);
        let mut inside = batch(1, &[Some("é"), None, None], &[]);
        inside.lengths[0] = 1;
        refused(inside, 0);
        refused(batch(1, &[None, None, None], &[]), 0);
    }
}
