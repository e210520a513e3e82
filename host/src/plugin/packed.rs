//! Indexer batches packed into one string (`indexer-packed-api`, 0.2.1).
//!
//! `index-batch` lowers every id, JSON text and picked value of a batch as a
//! string of its own: one guest allocation (a call into the guest) and one
//! copy each. A backend that exports `indexer-packed-api` gets the same
//! entries as one string and one list of lengths instead, written here
//! straight from the documents, so a batch crosses in two copies.

use std::ops::Deref;

use serde_json::Value;
use wasmtime::Store;
use wasmtime::component::{ComponentType, Func, Lower};

use super::bindings::GuestError;
use super::bindings::indexer::exports::weir::plugin::indexer_api::{BatchError, DocumentFailure};
use super::bindings::indexer::{Indexer, IndexerPre};
use super::host::PluginState;
use super::indexer_batch::BatchFormat;
use super::instance::{World, typed_export};
use crate::core::document::{self, Document};

/// The interface a packing indexer exports beside `indexer-api`.
const PACKED_EXPORT: &str = "weir:plugin/indexer-packed-api@0.2.5";

/// The length that marks an absent piece (no run id, no JSON text).
pub(crate) const ABSENT: u32 = u32::MAX;

/// `packed-batch`, as the guest reads it.
#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct PackedBatch<'a> {
    count: u32,
    text: &'a str,
    lengths: &'a [u32],
}

/// What `index-packed` answers: `index-batch`'s answer.
pub(crate) type Answer = Result<Vec<DocumentFailure>, BatchError>;

/// An indexer instance: `indexer-api`, and `index-packed` when the
/// component exports it.
pub(crate) struct IndexerWorld {
    api: Indexer,
    packed: Option<Func>,
}

impl Deref for IndexerWorld {
    type Target = Indexer;
    fn deref(&self) -> &Indexer {
        &self.api
    }
}

impl IndexerWorld {
    /// Whether the instance takes `index-packed`.
    pub(crate) fn packs(&self) -> bool {
        self.packed.is_some()
    }

    /// `index-packed(batch)`.
    pub(crate) async fn index_packed(
        &self,
        store: &mut Store<PluginState>,
        batch: &Packed,
    ) -> wasmtime::Result<Answer> {
        let func = self
            .packed
            .ok_or_else(|| wasmtime::format_err!("the plugin exports no `index-packed`"))?;
        let typed = func.typed::<(PackedBatch<'_>,), (Answer,)>(&*store)?;
        let (answer,) = typed.call_async(&mut *store, (batch.view(),)).await?;
        Ok(answer)
    }
}

impl World for IndexerWorld {
    const KIND: &'static str = "indexer";
    const API: &'static str = "indexer-api";
    type Pre = IndexerPre<PluginState>;
    type Started = BatchFormat;

    fn pre(pre: wasmtime::component::InstancePre<PluginState>) -> wasmtime::Result<Self::Pre> {
        IndexerPre::new(pre)
    }

    async fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Self> {
        let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
        let api = Indexer::new(&mut *store, &instance)?;
        let packed = typed_export::<(PackedBatch<'_>,), (Answer,)>(
            &instance,
            store,
            PACKED_EXPORT,
            "index-packed",
        )?;
        Ok(Self { api, packed })
    }

    async fn start(
        &self,
        store: &mut Store<PluginState>,
        config: &str,
    ) -> wasmtime::Result<Result<BatchFormat, GuestError>> {
        Ok(self
            .weir_plugin_indexer_api()
            .call_start(store, config)
            .await?
            .and_then(|f| {
                BatchFormat::checked(f.json, f.fields, f.omit, f.pick)
                    .map_err(|e| GuestError::Fatal(e.to_string()))
            }))
    }
}

/// A batch packed for `index-packed`: the text of every piece, and the
/// lengths that cut it up.
#[derive(Debug, Default)]
pub(crate) struct Packed {
    count: u32,
    text: Vec<u8>,
    lengths: Vec<u32>,
}

impl Packed {
    /// `docs` as `format` asks, in the layout `packed-batch` documents.
    /// `None` when a piece is too long to be told by a length (4 GiB).
    pub(crate) fn of(docs: &[Document], format: &BatchFormat) -> Option<Self> {
        let mut packed = Self {
            count: u32::try_from(docs.len()).ok()?,
            text: Vec::with_capacity(docs.iter().map(|d| approx_text(d, format)).sum()),
            lengths: Vec::with_capacity(docs.len() * (3 + 2 * format.pick.len())),
        };
        for doc in docs {
            packed.piece(|out| out.extend_from_slice(doc.id().as_bytes()))?;
            match doc.run_id() {
                Some(run_id) => packed.piece(|out| out.extend_from_slice(run_id.as_bytes()))?,
                None => packed.lengths.push(ABSENT),
            }
            if format.json {
                packed.piece(|out| {
                    doc.write_json_shaped(out, format.fields.as_deref(), &format.omit);
                })?;
            } else {
                packed.lengths.push(ABSENT);
            }
            for name in &format.pick {
                let count_at = packed.lengths.len();
                packed.lengths.push(0);
                let mut count = 0u32;
                for value in super::indexer_batch::picked_values(doc, name).filter(|v| !v.is_null())
                {
                    packed.piece(|out| write_text(out, value))?;
                    count += 1;
                }
                packed.lengths[count_at] = count;
            }
        }
        Some(packed)
    }

    /// Append one piece that `write` writes, and its length.
    fn piece(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Option<()> {
        let start = self.text.len();
        write(&mut self.text);
        let length = u32::try_from(self.text.len() - start).ok()?;
        (length != ABSENT).then(|| self.lengths.push(length))
    }

    fn view(&self) -> PackedBatch<'_> {
        PackedBatch {
            count: self.count,
            // Only whole UTF-8 strings and JSON text were written.
            text: std::str::from_utf8(&self.text).unwrap_or_default(),
            lengths: &self.lengths,
        }
    }
}

/// About how much text a document adds to a batch: its JSON when asked
/// for, a little for its id and picked values otherwise.
fn approx_text(doc: &Document, format: &BatchFormat) -> usize {
    if format.json {
        doc.approx_json_bytes()
    } else {
        doc.id().len() + 16 * format.pick.len()
    }
}

/// A picked value as text, as `document.get-strings` gives it: text as it
/// is, numbers as written, booleans, and JSON text for the rest (nulls are
/// skipped before).
fn write_text(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(text) => out.extend_from_slice(text.as_bytes()),
        Value::Number(n) => out.extend_from_slice(n.as_str().as_bytes()),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        other => document::write_json_value(out, other),
    }
}

#[cfg(test)]
mod tests;
