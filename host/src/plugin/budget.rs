//! What one plugin instance may hold, in one account.
//!
//! An instance holds memory in two places: its own linear memory, and what
//! it keeps in the host through the document interface (documents it built,
//! parsed or copied and has not handed over yet). Both count toward
//! `limits.memory_mib`; the documents also toward `limits.max_children`. Each
//! single document is bounded by the document layer itself
//! ([`crate::core::document::DocLimits`]), so a change that passes its checks grows
//! the account by at most one document; past the account the call traps and
//! the instance, with everything it held, is discarded.
//!
//! Other host-side resources (WASI and HTTP handles) live in a table of
//! their own, of at most [`MAX_HANDLES`] entries, each of bounded size
//! (HTTP fields at most [`MAX_HTTP_FIELDS_BYTES`]).

use crate::core::document::DocLimits;
use crate::core::limit::{Limit, LimitHit};

use super::spec::Limits;

/// Non-document handles one instance may have open at once (files,
/// streams, pollables, HTTP requests, fields and bodies). Real plugins keep
/// a few dozen.
pub(crate) const MAX_HANDLES: usize = 1024;

/// Handles a guest may have live beyond its documents and host resources
/// (borrows of what it is lent, resources of its own).
const HANDLE_HEADROOM: usize = 1024;

/// Most bytes one `wasi:http` fields collection (a request's or response's
/// headers) may hold.
pub(crate) const MAX_HTTP_FIELDS_BYTES: usize = 64 << 10;

/// One instance's account.
#[derive(Debug)]
pub(crate) struct Budget {
    /// Linear memory plus documents held, in bytes.
    memory_limit: usize,
    memory_mib: u64,
    max_documents: usize,
    /// The limits every document the plugin builds or is lent is held to.
    pub(crate) doc_limits: DocLimits,
    /// Linear memory of every memory of the instance.
    linear: usize,
    /// Bytes of the documents the plugin holds.
    held: usize,
    /// Documents the plugin holds.
    documents: usize,
    /// The limit a host call refused, which made the call trap.
    pub(crate) hit: Option<LimitHit>,
    /// A memory growth that was refused: how large it wanted to grow.
    pub(crate) refused_growth: Option<usize>,
}

impl Budget {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            memory_limit: limits.memory_bytes(),
            memory_mib: limits.memory_mib(),
            max_documents: usize::try_from(limits.max_children()).unwrap_or(usize::MAX),
            doc_limits: limits.doc_limits(),
            linear: 0,
            held: 0,
            documents: 0,
            hit: None,
            refused_growth: None,
        }
    }

    /// How many documents the instance's table of documents may have:
    /// every document it may hold and the one it is lent.
    pub(crate) fn documents_capacity(&self) -> usize {
        self.max_documents.saturating_add(1)
    }

    /// How many handles the guest may have live at once, over all its
    /// tables (wasmtime's store-wide cap, 100,000 by default): every
    /// document it may hold, the ones it is lent, and its other handles,
    /// with room to spare, so that `limits.max_children` (up to its
    /// ceiling) is what stops a plugin that holds too many documents, never
    /// the engine's own cap.
    pub(crate) fn component_handles(&self) -> usize {
        self.documents_capacity()
            .saturating_add(MAX_HANDLES)
            .saturating_add(HANDLE_HEADROOM)
    }

    /// A new call starts: nothing refused yet.
    pub(crate) fn start_call(&mut self) {
        self.hit = None;
        self.refused_growth = None;
    }

    /// Record `limit` (and why) as what stops the call, and return the trap
    /// that stops it.
    pub(crate) fn refuse(&mut self, limit: Limit, message: String) -> wasmtime::Error {
        let trap = wasmtime::Error::msg(message.clone());
        self.hit = Some(LimitHit::new(limit, message));
        trap
    }

    /// The plugin now holds one more document, of `bytes`.
    pub(crate) fn take_document(&mut self, bytes: usize) -> wasmtime::Result<()> {
        self.documents += 1;
        if self.documents > self.max_documents {
            let message = format!(
                "held more than {} documents at once without handing them over ({})",
                self.max_documents,
                Limit::MaxChildren
            );
            return Err(self.refuse(Limit::MaxChildren, message));
        }
        self.grow(bytes)
    }

    /// A document the plugin held grew by `bytes`.
    pub(crate) fn grow(&mut self, bytes: usize) -> wasmtime::Result<()> {
        self.held = self.held.saturating_add(bytes);
        if self.linear.saturating_add(self.held) > self.memory_limit {
            return Err(self.refuse(Limit::MemoryMib, self.over_memory()));
        }
        Ok(())
    }

    /// A document the plugin held shrank by `bytes`.
    pub(crate) fn shrink(&mut self, bytes: usize) {
        self.held = self.held.saturating_sub(bytes);
    }

    /// The plugin let go of a document of `bytes` (dropped, attached,
    /// published, returned).
    pub(crate) fn release_document(&mut self, bytes: usize) {
        self.documents = self.documents.saturating_sub(1);
        self.shrink(bytes);
    }

    fn over_memory(&self) -> String {
        format!(
            "exceeded its memory limit of {} MiB: {} MiB of linear memory and {} MiB of documents held in the host ({})",
            self.memory_mib,
            self.linear >> 20,
            self.held.div_ceil(1 << 20),
            Limit::MemoryMib
        )
    }
}

impl wasmtime::ResourceLimiter for Budget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let linear = self.linear.saturating_sub(current).saturating_add(desired);
        if linear.saturating_add(self.held) > self.memory_limit {
            self.refused_growth = Some(desired);
            return Err(wasmtime::Error::msg(self.over_memory()));
        }
        self.linear = linear;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; a million entries is far beyond
        // any real plugin and bounds what a hostile one can take.
        Ok(desired <= 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    fn budget(memory_mib: u64, max_children: u32) -> Budget {
        Budget::new(&Limits {
            memory_mib: Some(memory_mib),
            max_children: Some(max_children),
            ..Limits::default()
        })
    }

    #[test]
    fn linear_memory_and_held_documents_share_the_memory_limit() {
        let mut b = budget(4, 100);
        assert!(b.memory_growing(0, 3 << 20, None).expect("fits"));
        b.take_document(512 << 10).expect("3.5 MiB of 4");
        let e = b.take_document(1 << 20).expect_err("4.5 MiB of 4");
        assert!(e.to_string().contains("memory limit of 4 MiB"), "{e}");
        assert!(b.hit.is_some());
        b.release_document(1 << 20);
        b.release_document(512 << 10);
        assert!(b.memory_growing(3 << 20, 4 << 20, None).expect("all of it"));
        assert!(b.memory_growing(4 << 20, 5 << 20, None).is_err());
        assert_eq!(b.refused_growth, Some(5 << 20));
    }

    #[test]
    fn documents_are_counted() {
        let mut b = budget(256, 2);
        b.take_document(10).expect("1");
        b.take_document(10).expect("2");
        let e = b.take_document(10).expect_err("3 of 2");
        assert!(e.to_string().contains("limits.max_children"), "{e}");
    }
}
