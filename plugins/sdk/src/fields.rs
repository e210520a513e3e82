//! Several fields of a document in one call: the `fields` interface of
//! contract 0.2.1, as methods of [`Document`].
//!
//! Each host call costs about as much as a small field's work, so a stage
//! that reads three fields and writes two pays five calls per document
//! with the one-field methods, and two with these. They are imports of the
//! `batch-stage` world: use them in stages exported with
//! [`export_batch_stage!`](crate::export_batch_stage) or
//! [`export_stage!`](crate::export_stage), not in connectors (whose world
//! does not import `fields`).

use crate::bindings::batch_stage::weir::plugin::fields;
use crate::{Document, FieldError, Mode, Value};

pub use fields::{Change, FieldChange};

/// The most changes the host applies in one `update` call.
const MAX_CHANGES_PER_CALL: usize = 4096;

impl Document {
    /// [`get_all`](Document::get_all) of each of `names`, in order, in one
    /// call: a field's values, one for a single-valued field, none when
    /// absent.
    pub fn get_all_many(&self, names: &[String]) -> Vec<Vec<Value>> {
        fields::get_all_many(self, names)
    }

    /// [`get_strings`](Document::get_strings) of each of `names`, in order,
    /// in one call: values as text (numbers and booleans rendered, JSON as
    /// JSON text, nulls skipped).
    pub fn get_strings_many(&self, names: &[String]) -> Vec<Vec<String>> {
        fields::get_strings_many(self, names)
    }

    /// [`get_json`](Document::get_json) of each of `names`, in order, in one
    /// call: the whole value as JSON text (an array for a multi-valued
    /// field), none when absent.
    pub fn get_json_many(&self, names: &[String]) -> Vec<Option<String>> {
        fields::get_json_many(self, names)
    }

    /// Apply `changes` in order, as the one-field methods of the same names
    /// would, in one call (one per 4,096 changes, the most the host takes
    /// in a call; none for no changes). It stops at the first change that
    /// fails, with the changes before it applied; the error names the field.
    pub fn update(&self, changes: &[FieldChange]) -> Result<(), FieldError> {
        changes
            .chunks(MAX_CHANGES_PER_CALL)
            .try_for_each(|chunk| fields::update(self, chunk))
    }
}

impl FieldChange {
    /// As [`Document::set`]: `name` becomes single-valued with `value`.
    pub fn set(name: impl Into<String>, value: Value) -> Self {
        Self::new(name, Change::Set(value))
    }

    /// As [`Document::set_string`].
    pub fn set_string(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self::set(name, Value::Text(text.into()))
    }

    /// As [`Document::set_all`]: `name` becomes multi-valued with exactly `values`.
    pub fn set_all(name: impl Into<String>, values: Vec<Value>) -> Self {
        Self::new(name, Change::SetAll(values))
    }

    /// As [`Document::set_json`]: `name` becomes the JSON value `json`.
    pub fn set_json(name: impl Into<String>, json: impl Into<String>) -> Self {
        Self::new(name, Change::SetJson(json.into()))
    }

    /// As [`Document::add`]: `value` is appended (the field becomes multi-valued).
    pub fn add(name: impl Into<String>, value: Value) -> Self {
        Self::new(name, Change::Add(value))
    }

    /// As [`Document::remove`]: `name` is removed; nothing when absent.
    pub fn remove(name: impl Into<String>) -> Self {
        Self::new(name, Change::Remove)
    }

    fn new(name: impl Into<String>, change: Change) -> Self {
        Self {
            name: name.into(),
            change,
        }
    }
}

impl Mode {
    /// The changes that write `values` to `name` as [`update`](crate::update)
    /// does, for a document where `name` is `present` or not (only
    /// [`Mode::Skip`] looks): one value single-valued, several (or none)
    /// multi-valued, appended one by one in [`Mode::Append`].
    pub fn changes(self, name: &str, mut values: Vec<Value>, present: bool) -> Vec<FieldChange> {
        match self {
            Mode::Skip if present => Vec::new(),
            Mode::Append => values
                .into_iter()
                .map(|v| FieldChange::add(name, v))
                .collect(),
            _ if values.len() == 1 => vec![FieldChange::set(name, values.remove(0))],
            _ => vec![FieldChange::set_all(name, values)],
        }
    }
}
