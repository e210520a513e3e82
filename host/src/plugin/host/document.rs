//! The host side of the `document` interface: a plugin's handles on the
//! documents it is lent or holds, every change charged to its budget.

use serde_json::Value as Json;

use super::call_journal::Touch;
use super::convert::{from_wit, from_wit_all, to_wit, to_wit_error, wit_result};
use super::{Handle, PluginState, Wasm};
use crate::core::document::{self, Document};
use crate::core::limit::Limit;
use crate::plugin::bindings::{FieldError, UpdateMode, Value, stage};

impl PluginState {
    /// The document behind `handle`, if the plugin may use it: one it holds,
    /// or one lent for the current call. Every call that takes a document
    /// checks its handle here.
    pub(super) fn doc(&self, handle: &Handle) -> wasmtime::Result<&Document> {
        Ok(self.docs.get(handle)?)
    }

    /// Change the document behind `h` with `change`. The document checks
    /// its own limits; what a document the plugin holds grows by is charged
    /// to its budget (and traps past it).
    pub(super) fn edit<T>(
        &mut self,
        h: &Handle,
        touch: Touch<'_>,
        change: impl FnOnce(&mut Document) -> Result<T, document::FieldError>,
    ) -> Wasm<Result<T, FieldError>> {
        let lent = self.journal.position(h.rep());
        let doc = self.docs.get_mut(h)?;
        if let Some(position) = lent {
            self.journal.before_change(position, doc, touch);
        }
        let before = doc.approx_json_bytes();
        let result = change(doc);
        let after = doc.approx_json_bytes();
        self.charge(lent.is_none(), before, after)?;
        Ok(wit_result(result))
    }

    /// Make field `name` of the document behind `h` hold what `value` makes
    /// (a set of any kind), as [`Self::edit`] does; the value it replaces
    /// moves into the journal of a lent document instead of being copied
    /// there first.
    pub(super) fn replace(
        &mut self,
        h: &Handle,
        name: &str,
        value: impl FnOnce(usize) -> Result<Json, document::FieldError>,
    ) -> Wasm<Result<(), FieldError>> {
        let lent = self.journal.position(h.rep());
        let keep_old = lent.filter(|&position| self.journal.keeps(position, name));
        let doc = self.docs.get_mut(h)?;
        let before = doc.approx_json_bytes();
        let result = value(doc.limits().max_bytes).and_then(|value| doc.replace(name, value));
        let after = doc.approx_json_bytes();
        let result = match (result, keep_old) {
            (Ok(old), Some(position)) => {
                self.journal.replaced(position, name, old);
                Ok(())
            }
            (result, _) => result.map(drop),
        };
        self.charge(lent.is_none(), before, after)?;
        Ok(wit_result(result))
    }

    /// Charge what a document the plugin holds (`held`) grew by from
    /// `before` to `after` bytes to its budget, or give back what it shrank.
    fn charge(&mut self, held: bool, before: usize, after: usize) -> Wasm<()> {
        if held {
            if after > before {
                self.budget.grow(after - before)?;
            } else {
                self.budget.shrink(before - after);
            }
        }
        Ok(())
    }

    /// Hand the plugin a document it now holds: built under its limits,
    /// counted, and with no run id (only the host says which run a document
    /// belongs to).
    fn hold(&mut self, mut doc: Document) -> Wasm<Handle> {
        doc.clear_run_ids();
        doc.set_limits(self.budget.doc_limits);
        self.budget.take_document(doc.approx_json_bytes())?;
        Ok(self.docs.push(doc)?)
    }

    /// Change a flag of the document behind `h` (not charged: flags take
    /// no room).
    fn flag(&mut self, h: &Handle, change: impl FnOnce(&mut Document)) -> Wasm<()> {
        let lent = self.journal.position(h.rep());
        let doc = self.docs.get_mut(h)?;
        if let Some(position) = lent {
            self.journal.before_change(position, doc, Touch::Flags);
        }
        change(doc);
        Ok(())
    }

    /// Take back a document the plugin held (it published, attached,
    /// returned or dropped it). A lent document stays the host's: the
    /// plugin gives up its handle, and what it handed on is a copy.
    pub(crate) fn take_back(&mut self, h: Handle) -> Wasm<Document> {
        if let Some(position) = self.journal.position(h.rep()) {
            self.journal.release(position);
            return Ok(self.docs.get(&h)?.clone());
        }
        let doc = self.docs.delete(h)?;
        self.budget.release_document(doc.approx_json_bytes());
        Ok(doc)
    }

    /// A new document from the plugin's JSON text, held for it, or why it
    /// cannot be one ([`made`]).
    fn parse(
        &mut self,
        json: &str,
        parse: impl FnOnce(&str, document::DocLimits) -> Result<Document, document::FieldError>,
    ) -> Wasm<Result<Handle, FieldError>> {
        match made(json, self.budget.doc_limits, parse) {
            Ok(doc) => Ok(Ok(self.hold(doc)?)),
            Err(e) => Ok(Err(e)),
        }
    }
}

/// A document from a plugin's JSON text under `limits`, or why it cannot be
/// one. Text longer than a document may be is refused before it is parsed.
pub(super) fn made(
    json: &str,
    limits: document::DocLimits,
    parse: impl FnOnce(&str, document::DocLimits) -> Result<Document, document::FieldError>,
) -> Result<Document, FieldError> {
    if json.len() > limits.max_bytes {
        return Err(too_much_json(json.len()));
    }
    parse(json, limits).map_err(to_wit_error)
}

fn too_much_json(bytes: usize) -> FieldError {
    FieldError::TooLarge(format!(
        "{bytes} bytes of JSON are over the document limit ({})",
        Limit::MaxDocumentMib
    ))
}

impl stage::weir::plugin::document::Host for PluginState {}

impl stage::weir::plugin::document::HostDocument for PluginState {
    fn new(&mut self, id: String) -> Wasm<Handle> {
        // An id is as much of the document as a field: the same limit.
        if id.len() > self.budget.doc_limits.max_bytes {
            let hit = format!(
                "a document id of {} bytes is over the document limit ({})",
                id.len(),
                Limit::MaxDocumentMib
            );
            // The constructor cannot return an error: the call stops.
            return Err(self.budget.refuse(Limit::MaxDocumentMib, hit));
        }
        self.hold(Document::new(id))
    }

    fn from_json(&mut self, json: String) -> Wasm<Result<Handle, FieldError>> {
        self.parse(&json, Document::from_json_str_within)
    }

    fn from_json_with_id(&mut self, id: String, json: String) -> Wasm<Result<Handle, FieldError>> {
        self.parse(&json, |json, limits| {
            Document::from_fields_json_str(id, json, limits)
        })
    }

    fn id(&mut self, h: Handle) -> Wasm<String> {
        Ok(self.doc(&h)?.id().to_owned())
    }

    fn run_id(&mut self, h: Handle) -> Wasm<Option<String>> {
        Ok(self.doc(&h)?.run_id().map(str::to_owned))
    }

    fn has(&mut self, h: Handle, name: String) -> Wasm<bool> {
        Ok(self.doc(&h)?.has(&name))
    }

    fn field_names(&mut self, h: Handle) -> Wasm<Vec<String>> {
        Ok(self.doc(&h)?.field_names().map(str::to_owned).collect())
    }

    fn value_count(&mut self, h: Handle, name: String) -> Wasm<u32> {
        Ok(u32::try_from(self.doc(&h)?.value_count(&name)).unwrap_or(u32::MAX))
    }

    fn is_multi_valued(&mut self, h: Handle, name: String) -> Wasm<bool> {
        Ok(self.doc(&h)?.is_multi_valued(&name))
    }

    fn remove(&mut self, h: Handle, name: String) -> Wasm<Result<bool, FieldError>> {
        self.edit(&h, Touch::Whole, |doc| doc.remove(&name))
    }

    fn rename(
        &mut self,
        h: Handle,
        source: String,
        target: String,
        mode: UpdateMode,
    ) -> Wasm<Result<bool, FieldError>> {
        let mode = match mode {
            UpdateMode::Overwrite => document::UpdateMode::Overwrite,
            UpdateMode::Append => document::UpdateMode::Append,
            UpdateMode::Skip => document::UpdateMode::Skip,
        };
        self.edit(&h, Touch::Whole, |doc| doc.rename(&source, &target, mode))
    }

    fn get(&mut self, h: Handle, name: String) -> Wasm<Option<Value>> {
        Ok(self.doc(&h)?.get(&name).map(to_wit))
    }

    fn get_all(&mut self, h: Handle, name: String) -> Wasm<Vec<Value>> {
        Ok(self.doc(&h)?.get_all(&name).map(to_wit).collect())
    }

    fn get_string(&mut self, h: Handle, name: String) -> Wasm<Option<String>> {
        Ok(self.doc(&h)?.get_string(&name))
    }

    fn get_strings(&mut self, h: Handle, name: String) -> Wasm<Vec<String>> {
        Ok(self
            .doc(&h)?
            .get_all(&name)
            .filter_map(document::value_as_text)
            .collect())
    }

    fn get_json(&mut self, h: Handle, name: String) -> Wasm<Option<String>> {
        Ok(self
            .doc(&h)?
            .fields()
            .get(name.as_str())
            .map(Json::to_string))
    }

    fn set_json(&mut self, h: Handle, name: String, json: String) -> Wasm<Result<(), FieldError>> {
        self.replace(&h, &name, |max| document::parse_value_within(&json, max))
    }

    fn set(&mut self, h: Handle, name: String, value: Value) -> Wasm<Result<(), FieldError>> {
        self.replace(&h, &name, |max| from_wit(value, max))
    }

    fn set_string(
        &mut self,
        h: Handle,
        name: String,
        value: String,
    ) -> Wasm<Result<(), FieldError>> {
        self.replace(&h, &name, |_| Ok(Json::String(value)))
    }

    fn set_all(
        &mut self,
        h: Handle,
        name: String,
        values: Vec<Value>,
    ) -> Wasm<Result<(), FieldError>> {
        self.replace(&h, &name, |max| from_wit_all(values, max))
    }

    fn add(&mut self, h: Handle, name: String, value: Value) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, Touch::Field(&name), |doc| {
            doc.add(&name, from_wit(value, doc.limits().max_bytes)?)
        })
    }

    fn set_or_add(
        &mut self,
        h: Handle,
        name: String,
        value: Value,
    ) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, Touch::Field(&name), |doc| {
            doc.set_or_add(&name, from_wit(value, doc.limits().max_bytes)?)
        })
    }

    fn get_path(&mut self, h: Handle, path: String) -> Wasm<Result<Option<Value>, FieldError>> {
        Ok(wit_result(
            self.doc(&h)?.get_path(&path).map(|v| v.map(to_wit)),
        ))
    }

    fn set_path(&mut self, h: Handle, path: String, value: Value) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, Touch::Whole, |doc| {
            doc.set_path(&path, from_wit(value, doc.limits().max_bytes)?)
        })
    }

    fn remove_path(&mut self, h: Handle, path: String) -> Wasm<Result<bool, FieldError>> {
        self.edit(&h, Touch::Whole, |doc| doc.remove_path(&path))
    }

    fn add_child(&mut self, h: Handle, child: Handle) -> Wasm<Result<(), FieldError>> {
        // The child is handed over either way: refused, it is dropped.
        let child = self.take_back(child)?;
        self.edit(&h, Touch::Whole, |parent| parent.add_child(child))
    }

    fn children(&mut self, h: Handle) -> Wasm<Vec<Handle>> {
        // One copy at a time, each counted before the next is made.
        let count = self.doc(&h)?.children().len();
        (0..count)
            .map(|i| {
                let copy = self.doc(&h)?.children()[i].clone();
                self.hold(copy)
            })
            .collect()
    }

    fn has_children(&mut self, h: Handle) -> Wasm<bool> {
        Ok(!self.doc(&h)?.children().is_empty())
    }

    fn set_dropped(&mut self, h: Handle, dropped: bool) -> Wasm<()> {
        self.flag(&h, |doc| doc.set_dropped(dropped))
    }

    fn is_dropped(&mut self, h: Handle) -> Wasm<bool> {
        Ok(self.doc(&h)?.is_dropped())
    }

    fn set_skip_stages(&mut self, h: Handle, skip: bool) -> Wasm<()> {
        self.flag(&h, |doc| doc.set_skip_stages(skip))
    }

    fn skips_stages(&mut self, h: Handle) -> Wasm<bool> {
        Ok(self.doc(&h)?.skips_stages())
    }

    fn to_json(&mut self, h: Handle) -> Wasm<String> {
        Ok(self.doc(&h)?.to_json_string())
    }

    fn load_json(&mut self, h: Handle, json: String) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, Touch::Whole, |doc| {
            let parsed = document::parse_value_within(&json, doc.limits().max_bytes)?;
            doc.load_json(parsed)
        })
    }

    fn drop(&mut self, h: Handle) -> Wasm<()> {
        match self.journal.position(h.rep()) {
            // A lent document stays where it is: the host takes it back
            // when the call ends.
            Some(position) => self.journal.release(position),
            None => {
                self.take_back(h)?;
            }
        }
        Ok(())
    }
}
