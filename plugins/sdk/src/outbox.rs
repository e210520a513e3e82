//! Documents published many to a call (contract 0.2.3, `publishing-packed`).
//!
//! [`Publisher::publish`] takes one document a call, made by a call before
//! it ([`Document::from_json_with_id`](crate::Document::from_json_with_id)).
//! A connector that has documents as JSON text (lines of a file, rows,
//! records) gathers them in an [`Outbox`] instead and sends it when it
//! [`Outbox::is_full`] and at the end: one call for many documents, which
//! the host makes and publishes in order, as the one-by-one calls would.
//!
//! ```ignore
//! let mut outbox = Outbox::new();
//! for (id, json) in records {
//!     outbox.push(&id, &json);
//!     if outbox.is_full() {
//!         outbox.send(publisher).map_err(|r| PluginError::Fatal(r.to_string()))?;
//!     }
//! }
//! outbox.send(publisher).map_err(|r| PluginError::Fatal(r.to_string()))?;
//! ```
//!
//! Sent is published: what a connector does after a document is published
//! (its [`sync::set`](crate::sync::set), say) waits until the outbox holding
//! it is sent.

use crate::Publisher;
use crate::bindings::connector::weir::plugin::publishing_packed::{
    PackedDocuments, PackedRefusal, publish_packed,
};

/// The most documents one call takes; [`Outbox::send`] makes as many calls
/// as it holds.
pub const MAX_PER_CALL: usize = 4096;

/// Documents [`Outbox::is_full`] at: enough that a call's cost is nothing
/// beside its documents', few enough to keep the pipeline busy.
const FULL_DOCUMENTS: usize = 256;
/// Bytes of text [`Outbox::is_full`] at.
const FULL_BYTES: usize = 1 << 20;

/// Documents as id and JSON text, waiting to be published in one call.
pub struct Outbox {
    /// The call's argument, built in place: every id and JSON text one
    /// after another, and two lengths per document (its id's, its text's).
    docs: PackedDocuments,
}

impl Default for Outbox {
    fn default() -> Self {
        Self {
            docs: PackedDocuments {
                text: String::new(),
                lengths: Vec::new(),
            },
        }
    }
}

/// Why [`Outbox::send`] stopped: the documents before `at` were published,
/// the one at `at` and those after it were not.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The position, in the outbox, of the document that was not published.
    pub at: usize,
    pub reason: Reason,
}

/// Why a document was not published: `Invalid(field_error)`, its text is
/// not a document (not JSON, not an object, over the document limits), as
/// `from-json-with-id` says; `Refused(message)`, the run refused it, as
/// [`Publisher::publish`] refuses (the connector should stop and return the
/// message as its error).
pub use crate::bindings::connector::weir::plugin::publishing_packed::PackedReason as Reason;

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.reason {
            Reason::Invalid(e) => write!(f, "not a document: {}", crate::field_error_message(e)),
            Reason::Refused(why) => write!(f, "publish refused: {why}"),
        }
    }
}

impl Outbox {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add the document `id` whose fields are `fields_json`, the JSON text
    /// of one object (as `from-json-with-id` takes them). Ids and texts of
    /// any size are taken here; the host says which it refuses.
    pub fn push(&mut self, id: &str, fields_json: &str) {
        self.docs.text.push_str(id);
        self.docs.text.push_str(fields_json);
        self.docs.lengths.push(piece_length(id));
        self.docs.lengths.push(piece_length(fields_json));
    }

    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.docs.lengths.len() / 2
    }

    pub fn is_empty(&self) -> bool {
        self.docs.lengths.is_empty()
    }

    /// Whether it holds enough to be sent now (256 documents or 1 MiB of
    /// text).
    pub fn is_full(&self) -> bool {
        self.len() >= FULL_DOCUMENTS || self.docs.text.len() >= FULL_BYTES
    }

    /// Publish every document it holds, in order, and empty it (also when a
    /// document is refused: those after it are not published).
    pub fn send(&mut self, publisher: &Publisher) -> Result<(), Refusal> {
        let result = if self.docs.lengths.len() <= 2 * MAX_PER_CALL {
            publish_packed(publisher, &self.docs).map_err(|r| refusal(0, r))
        } else {
            self.send_in_calls(publisher)
        };
        self.docs.text.clear();
        self.docs.lengths.clear();
        result
    }

    /// More than one call's documents: [`MAX_PER_CALL`] a call.
    fn send_in_calls(&self, publisher: &Publisher) -> Result<(), Refusal> {
        let mut start = 0usize;
        for (call, lengths) in self.docs.lengths.chunks(2 * MAX_PER_CALL).enumerate() {
            let bytes: usize = lengths.iter().map(|&l| l as usize).sum();
            let end = (start + bytes).min(self.docs.text.len());
            let docs = PackedDocuments {
                text: self.docs.text[start..end].to_owned(),
                lengths: lengths.to_vec(),
            };
            start = end;
            publish_packed(publisher, &docs).map_err(|r| refusal(call * MAX_PER_CALL, r))?;
        }
        Ok(())
    }
}

/// The host's refusal of a call whose first document is the outbox's `first`.
fn refusal(first: usize, refused: PackedRefusal) -> Refusal {
    Refusal {
        at: first + refused.at as usize,
        reason: refused.reason,
    }
}

/// A piece's length as the call carries it. A piece of 4 GiB or more cannot
/// be a document (the host refuses far less); its length is cut to the most
/// a length can say, so the host refuses the call whole.
fn piece_length(piece: &str) -> u32 {
    u32::try_from(piece.len()).unwrap_or(u32::MAX)
}
