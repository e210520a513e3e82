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
            let ends = &self.ends[i * self.fields..(i + 1) * self.fields];
            let start = match i {
                0 => 0,
                _ => self.ends[i * self.fields - 1],
            };
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
