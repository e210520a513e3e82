//! The document: what moves from a connector through stages to an indexer.
//!
//! A [`Document`] has an id, an optional run id, named fields holding JSON
//! values, and optionally nested children. A field holding a JSON array is
//! *multi-valued*: [`Document::get`] returns its first value and
//! [`Document::get_all`] each of them. Plugins reach documents only through the
//! `document` resource of the WIT contract, which maps one to one onto the
//! methods here.
//!
//! The type and its field methods are here; the rest of the module is one
//! concern a file: [`DocLimits`] and the checks against them (`limits`),
//! byte and depth accounting (`sizing`), nested paths (`path`), the bounded
//! JSON parser (`parse`), reading and writing JSON (`json`, `writer`), and
//! [`FieldError`] (`error`).

use serde_json::Value;

mod error;
mod fields;
mod json;
mod limits;
mod number;
mod parse;
mod path;
mod sizing;
#[cfg(test)]
mod tests;
mod writer;

pub use error::FieldError;
pub use fields::{FieldName, Fields};
pub use limits::DocLimits;
pub use number::{number_as_written, same_json, same_number};
pub use parse::parse_value_within;
pub use sizing::{MIN_DOCUMENT_BYTES, MIN_VALUE_BYTES, container_depth, value_bytes};
pub use writer::write_value as write_json_value;

use limits::admit_bytes;
use sizing::{CHILDREN_BYTES, append_bytes, entry_bytes, run_id_bytes};

/// Field names a plugin cannot set, rename or remove through field methods.
pub const RESERVED_FIELDS: [&str; 4] = [ID_FIELD, RUN_ID_FIELD, CHILDREN_FIELD, DELETED_FIELD];
/// JSON key of the document id.
pub const ID_FIELD: &str = "id";
/// JSON key of the run id.
pub const RUN_ID_FIELD: &str = "run_id";
/// JSON key of the nested children.
pub const CHILDREN_FIELD: &str = "_children";
/// JSON key marking a deletion marker (`"_deleted": true`): the document
/// with this id is gone from its source, and the indexer deletes it.
pub const DELETED_FIELD: &str = "_deleted";

/// How [`Document::rename`] treats a target that already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    Overwrite,
    Append,
    Skip,
}

/// A document in flight.
#[derive(Debug, Clone)]
pub struct Document {
    id: String,
    run_id: Option<String>,
    fields: Fields,
    children: Vec<Document>,
    dropped: bool,
    skip_stages: bool,
    /// A deletion marker: the document with this id is gone from its source.
    deleted: bool,
    /// [`Document::approx_json_bytes`], kept up to date by every change.
    bytes: usize,
    limits: DocLimits,
}

/// An empty document with an empty id, measured.
impl Default for Document {
    fn default() -> Self {
        Self {
            id: String::new(),
            run_id: None,
            fields: Fields::default(),
            children: Vec::new(),
            dropped: false,
            skip_stages: false,
            deleted: false,
            bytes: MIN_DOCUMENT_BYTES,
            limits: DocLimits::default(),
        }
    }
}

/// Documents are equal when their content is; the limits they were built
/// under do not count.
impl PartialEq for Document {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.run_id == other.run_id
            && self.fields == other.fields
            && self.children == other.children
            && self.dropped == other.dropped
            && self.skip_stages == other.skip_stages
            && self.deleted == other.deleted
    }
}

fn check_name(name: &str) -> Result<(), FieldError> {
    if RESERVED_FIELDS.contains(&name) {
        return Err(FieldError::ReservedField(name.to_owned()));
    }
    Ok(())
}

/// The values of a field: each element of an array, else the value itself.
fn values_of(value: &Value) -> impl Iterator<Item = &Value> {
    let slice: &[Value] = match value {
        Value::Array(items) => items,
        single => std::slice::from_ref(single),
    };
    slice.iter()
}

/// Turn `slot` into an array (wrapping a single value) and append `value`.
fn append(slot: &mut Value, value: Value) {
    match slot {
        Value::Array(items) => items.push(value),
        single => {
            let first = single.take();
            *single = Value::Array(vec![first, value]);
        }
    }
}

impl Document {
    /// A new document with no fields, under the default limits.
    pub fn new(id: impl Into<String>) -> Self {
        let mut doc = Self {
            id: id.into(),
            ..Self::default()
        };
        doc.bytes = doc.measure_bytes();
        doc
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    pub fn set_run_id(&mut self, run_id: Option<String>) {
        self.bytes -= run_id_bytes(self.run_id.as_deref());
        self.bytes += run_id_bytes(run_id.as_deref());
        self.run_id = run_id;
    }

    /// Forget the run id of this document and of every nested child: only
    /// the host says which run a document belongs to.
    pub fn clear_run_ids(&mut self) {
        self.set_run_id(None);
        for child in &mut self.children {
            let before = child.bytes;
            child.clear_run_ids();
            self.bytes -= before - child.bytes;
        }
    }

    /// The limits this document is built under.
    pub fn limits(&self) -> DocLimits {
        self.limits
    }

    /// Build further under `limits` (what is already there stays).
    pub fn set_limits(&mut self, limits: DocLimits) {
        self.limits = limits;
    }

    /// Whether `name` is present, with any value.
    pub fn has(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }

    /// Field names in insertion order (reserved names never appear).
    pub fn field_names(&self) -> impl Iterator<Item = &str> {
        self.fields.keys().map(FieldName::as_str)
    }

    /// All fields, for hosts and indexers that walk the whole document.
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// How many values `name` holds.
    pub fn value_count(&self, name: &str) -> usize {
        self.fields.get(name).map_or(0, |v| values_of(v).count())
    }

    /// Whether `name` holds a list of values (a JSON array).
    pub fn is_multi_valued(&self, name: &str) -> bool {
        matches!(self.fields.get(name), Some(Value::Array(_)))
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        values_of(self.fields.get(name)?).next()
    }

    /// Every value of `name`.
    pub fn get_all(&self, name: &str) -> impl Iterator<Item = &Value> {
        self.fields.get(name).into_iter().flat_map(values_of)
    }

    /// The first value of `name` as text; `None` when absent or null.
    pub fn get_string(&self, name: &str) -> Option<String> {
        self.get(name).and_then(value_as_text)
    }

    /// Make `name` hold `value`.
    pub fn set(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        self.replace(name, value).map(drop)
    }

    /// Make `name` hold `value`, and give back the value it held (none when
    /// it was absent).
    pub fn replace(&mut self, name: &str, value: Value) -> Result<Option<Value>, FieldError> {
        check_name(name)?;
        self.admit_depth(1 + container_depth(&value))?;
        let added = value_bytes(&value);
        let (bytes, limits) = (self.bytes, self.limits);
        match self.fields.get_mut(name) {
            Some(slot) => {
                let after = bytes - value_bytes(slot) + added;
                admit_bytes(&self.id, limits, bytes, after)?;
                self.bytes = after;
                Ok(Some(std::mem::replace(slot, value)))
            }
            None => {
                let after = bytes + entry_bytes(name, added);
                admit_bytes(&self.id, limits, bytes, after)?;
                self.fields.insert(name.into(), value);
                self.bytes = after;
                Ok(None)
            }
        }
    }

    /// Make `name` multi-valued with exactly `values`.
    pub fn set_all(&mut self, name: &str, values: Vec<Value>) -> Result<(), FieldError> {
        self.set(name, Value::Array(values))
    }

    /// Append `value` to `name`, making it multi-valued.
    pub fn add(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        self.append_to(name, value, true)
    }

    /// Set `name` when absent, else append to it.
    pub fn set_or_add(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        self.append_to(name, value, false)
    }

    /// Append `value` to `name`; when `name` is absent it becomes `[value]`
    /// (`as_list`) or `value`.
    fn append_to(&mut self, name: &str, value: Value, as_list: bool) -> Result<(), FieldError> {
        check_name(name)?;
        let listed = as_list || self.fields.contains_key(name);
        self.admit_depth(1 + usize::from(listed) + container_depth(&value))?;
        if let Some(single) = self.fields.get(name).filter(|v| !v.is_array()) {
            // It is about to be wrapped in an array: one level deeper.
            self.admit_depth(2 + container_depth(single))?;
        }
        let after = match self.fields.get(name) {
            Some(slot) => self.bytes + append_bytes(slot.is_array(), &value),
            None if as_list => {
                self.bytes + entry_bytes(name, MIN_VALUE_BYTES + 1 + value_bytes(&value))
            }
            None => self.bytes + entry_bytes(name, value_bytes(&value)),
        };
        self.admit_bytes(after)?;
        match self.fields.get_mut(name) {
            Some(slot) => append(slot, value),
            None => {
                let value = if as_list {
                    Value::Array(vec![value])
                } else {
                    value
                };
                self.fields.insert(name.into(), value);
            }
        }
        self.bytes = after;
        Ok(())
    }

    /// Remove `name`; true when it was present.
    pub fn remove(&mut self, name: &str) -> Result<bool, FieldError> {
        check_name(name)?;
        Ok(match self.fields.shift_remove(name) {
            Some(old) => {
                self.bytes -= entry_bytes(name, value_bytes(&old));
                true
            }
            None => false,
        })
    }

    /// Move `source` to `target`; false when `source` was absent.
    pub fn rename(
        &mut self,
        source: &str,
        target: &str,
        mode: UpdateMode,
    ) -> Result<bool, FieldError> {
        check_name(source)?;
        check_name(target)?;
        if source == target {
            return Ok(self.has(source));
        }
        let Some(value) = self.fields.get(source) else {
            return Ok(false);
        };
        let moved = value_bytes(value);
        let mut after = self.bytes - entry_bytes(source, moved);
        match (self.fields.get(target), mode) {
            (Some(_), UpdateMode::Skip) => {}
            (Some(slot), UpdateMode::Append) => {
                let mut listed = slot.is_array();
                if !listed {
                    // It is about to be wrapped in an array: one level deeper.
                    self.admit_depth(2 + container_depth(slot))?;
                }
                for v in values_of(value) {
                    self.admit_depth(2 + container_depth(v))?;
                    after += append_bytes(listed, v);
                    listed = true;
                }
            }
            (Some(old), UpdateMode::Overwrite) => after = after - value_bytes(old) + moved,
            (None, _) => after += entry_bytes(target, moved),
        }
        self.admit_bytes(after)?;
        let value = self.fields.shift_remove(source).unwrap_or_default();
        match (self.fields.get_mut(target), mode) {
            (Some(_), UpdateMode::Skip) => {}
            (Some(slot), UpdateMode::Append) => {
                for v in values_of(&value) {
                    append(slot, v.clone());
                }
            }
            (Some(slot), UpdateMode::Overwrite) => *slot = value,
            (None, _) => {
                self.fields.insert(target.into(), value);
            }
        }
        self.bytes = after;
        Ok(true)
    }

    /// Nest `child` inside this document, within this document's limits.
    pub fn add_child(&mut self, child: Document) -> Result<(), FieldError> {
        // This document's object, `_children`, then the child's own levels.
        self.admit_depth(2 + child.depth())?;
        let framing = if self.children.is_empty() {
            CHILDREN_BYTES
        } else {
            0
        };
        self.admit_bytes(self.bytes.saturating_add(framing + child.bytes + 1))?;
        self.bytes += framing + child.bytes + 1;
        self.children.push(child);
        Ok(())
    }

    pub fn children(&self) -> &[Document] {
        &self.children
    }

    pub fn set_dropped(&mut self, dropped: bool) {
        self.dropped = dropped;
    }

    pub fn is_dropped(&self) -> bool {
        self.dropped
    }

    pub fn set_skip_stages(&mut self, skip: bool) {
        self.skip_stages = skip;
    }

    pub fn skips_stages(&self) -> bool {
        self.skip_stages
    }

    /// Make this document a deletion marker (or not): it skips the stages,
    /// and the indexer deletes the document with its id.
    pub fn set_deleted(&mut self, deleted: bool) {
        self.deleted = deleted;
        self.bytes = self.measure_bytes();
    }

    /// Whether this is a deletion marker.
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }
}

/// A value as text: strings as they are, scalars rendered, JSON as JSON text.
pub fn value_as_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        // As written (numbers keep their text), without the formatter.
        Value::Number(n) => Some(n.as_str().to_owned()),
        other => Some(other.to_string()),
    }
}
