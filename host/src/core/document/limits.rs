//! How large and how deep a document may grow, and the checks every change
//! and every freshly built document pass before they are kept.

use super::{Document, FieldError};
use crate::core::limit::Limit;

/// How large and how deep a document may grow.
///
/// A document carries the limits it is built under, and every method that
/// adds to it checks them *before* anything is allocated: no document, and
/// so no JSON walk over one (writing, measuring, dropping), is ever larger
/// or deeper than they allow, whatever a plugin asks for. The host sets a
/// plugin's limits on each document it creates or lends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocLimits {
    /// Most bytes, as [`Document::approx_json_bytes`] measures them.
    pub max_bytes: usize,
    /// Deepest nesting of the document's JSON: the document object is level
    /// 1, each object or array inside it one more, a nested child two more.
    /// Capped at [`DocLimits::MAX_DEPTH`].
    pub max_depth: usize,
}

impl DocLimits {
    /// The deepest any document may be, whatever its limits say: well under
    /// what JSON readers accept (serde_json stops at 128 levels), so every
    /// document that is written can be read back.
    pub const MAX_DEPTH: usize = 100;

    /// For documents the host reads itself (messages between processes):
    /// up to 4 GiB, [`DocLimits::MAX_DEPTH`] deep.
    pub const HOST: Self = Self {
        max_bytes: 4 << 30,
        max_depth: Self::MAX_DEPTH,
    };

    fn depth(&self) -> usize {
        self.max_depth.min(Self::MAX_DEPTH)
    }
}

impl Default for DocLimits {
    /// 16 MiB, 64 levels: the plugin defaults.
    fn default() -> Self {
        Self {
            max_bytes: 16 << 20,
            max_depth: 64,
        }
    }
}

impl Document {
    /// Refuse growing from `self.bytes` to `after` past the byte limit.
    pub(super) fn admit_bytes(&self, after: usize) -> Result<(), FieldError> {
        admit_bytes(&self.id, self.limits, self.bytes, after)
    }

    /// Refuse a value that would sit `depth` levels deep.
    pub(super) fn admit_depth(&self, depth: usize) -> Result<(), FieldError> {
        let max = self.limits.depth();
        if depth > max {
            return Err(FieldError::TooLarge(format!(
                "document `{}` would be nested {depth} levels deep, over the limit of {max} ({})",
                self.id,
                Limit::MaxDepth
            )));
        }
        Ok(())
    }

    /// Measure a freshly built document and check it against `limits`.
    pub(super) fn admitted(mut self, limits: DocLimits) -> Result<Self, FieldError> {
        self.bytes = self.measure_bytes();
        self.within(limits)
    }

    /// This (measured) document, checked against `limits` and built
    /// further under them.
    fn within(mut self, limits: DocLimits) -> Result<Self, FieldError> {
        self.limits = limits;
        let depth = self.depth();
        if depth > limits.depth() {
            return Err(FieldError::TooLarge(format!(
                "document `{}` is nested {depth} levels deep, over the limit of {} ({})",
                self.id,
                limits.depth(),
                Limit::MaxDepth
            )));
        }
        if self.bytes > limits.max_bytes {
            return Err(FieldError::TooLarge(format!(
                "document `{}` is about {} bytes, over the limit of {} ({})",
                self.id,
                self.bytes,
                human_bytes(limits.max_bytes),
                Limit::MaxDocumentMib
            )));
        }
        Ok(self)
    }
}

/// Refuse document `id` growing from `before` to `after` bytes past
/// `limits`. Changes that do not grow a document are always allowed.
pub(super) fn admit_bytes(
    id: &str,
    limits: DocLimits,
    before: usize,
    after: usize,
) -> Result<(), FieldError> {
    let max = limits.max_bytes;
    // `usize::MAX`: a size that saturated on the way (a huge index).
    if after == usize::MAX || (after > max && after > before) {
        return Err(FieldError::TooLarge(format!(
            "document `{id}` would grow to about {after} bytes, over the limit of {} ({})",
            human_bytes(max),
            Limit::MaxDocumentMib
        )));
    }
    Ok(())
}

pub(super) fn human_bytes(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}
