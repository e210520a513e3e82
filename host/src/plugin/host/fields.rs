//! The host side of the `fields` interface (contract 0.2.1): several fields
//! of a document read or changed in one call, each exactly as the
//! `document` method of the same name does it.
//!
//! A call's names and changes are bounded ([`MAX_PER_CALL`]), and so is what
//! a read answers: a plugin asking for one big field many times over would
//! otherwise make the host build an answer many times a document's size.

use serde_json::Value as Json;

use super::convert::{from_wit, to_wit};
use super::lent::Touch;
use super::{Handle, PluginState, Wasm};
use crate::core::document::{self, Document};
use crate::core::limit::Limit;
use crate::plugin::bindings::batch_stage::weir::plugin::fields::{Change, FieldChange, Host};
use crate::plugin::bindings::{FieldError, Value};

/// The most names one read takes, and the most changes one `update` makes.
pub(crate) const MAX_PER_CALL: usize = 4096;

impl PluginState {
    /// Read `names` of the document behind `h` with `read`, whose answer for
    /// one field is about `bytes` long; the whole answer stays within the
    /// plugin's document limit.
    fn read_many<T>(
        &mut self,
        h: &Handle,
        names: &[String],
        read: impl Fn(&Document, &str) -> T,
        bytes: impl Fn(&T) -> usize,
    ) -> Wasm<Vec<T>> {
        if names.len() > MAX_PER_CALL {
            let message = format!(
                "asked for {} fields in one call, more than the {MAX_PER_CALL} one call reads",
                names.len()
            );
            return Err(self.budget.refuse(Limit::MaxDocumentMib, message));
        }
        let max = self.budget.doc_limits.max_bytes;
        let doc = self.docs.get(h)?;
        let mut total = 0usize;
        let mut answer = Vec::with_capacity(names.len());
        for name in names {
            let value = read(doc, name);
            total = total.saturating_add(bytes(&value));
            if total > max {
                let message = format!(
                    "asked for more than {max} bytes of fields in one call, more than a document may hold (limits.max_document_mib)"
                );
                return Err(self.budget.refuse(Limit::MaxDocumentMib, message));
            }
            answer.push(value);
        }
        Ok(answer)
    }
}

/// About how many bytes a WIT value takes.
fn wit_bytes(value: &Value) -> usize {
    match value {
        Value::Text(s) | Value::Number(s) | Value::Json(s) => s.len() + 8,
        _ => 8,
    }
}

/// Apply one change to `doc`, as the `document` method of its name does.
fn apply(doc: &mut Document, name: &str, change: Change) -> Result<(), document::FieldError> {
    let max = doc.limits().max_bytes;
    match change {
        Change::Set(value) => doc.set(name, from_wit(value, max)?),
        Change::SetAll(values) => {
            let values = values
                .into_iter()
                .map(|v| from_wit(v, max))
                .collect::<Result<Vec<_>, _>>()?;
            doc.set_all(name, values)
        }
        Change::SetJson(json) => doc.set(name, document::parse_value_within(&json, max)?),
        Change::Add(value) => doc.add(name, from_wit(value, max)?),
        Change::Remove => doc.remove(name).map(drop),
    }
}

/// `error` as the error of the change to field `name` (a reserved name
/// names itself).
fn naming(name: &str, error: document::FieldError) -> document::FieldError {
    use document::FieldError as E;
    let named = |m: String| {
        format!(
            "field `{}`: {m}",
            crate::core::text::clip_message(name.to_owned())
        )
    };
    match error {
        E::ReservedField(m) => E::ReservedField(m),
        E::WrongType(m) => E::WrongType(named(m)),
        E::InvalidPath(m) => E::InvalidPath(named(m)),
        E::InvalidJson(m) => E::InvalidJson(named(m)),
        E::TooLarge(m) => E::TooLarge(named(m)),
    }
}

impl Host for PluginState {
    fn get_all_many(&mut self, h: Handle, names: Vec<String>) -> Wasm<Vec<Vec<Value>>> {
        self.read_many(
            &h,
            &names,
            |doc, name| doc.get_all(name).map(to_wit).collect(),
            |values: &Vec<Value>| values.iter().map(wit_bytes).sum::<usize>() + 8,
        )
    }

    fn get_strings_many(&mut self, h: Handle, names: Vec<String>) -> Wasm<Vec<Vec<String>>> {
        self.read_many(
            &h,
            &names,
            |doc, name| {
                doc.get_all(name)
                    .filter_map(document::value_as_text)
                    .collect()
            },
            |texts: &Vec<String>| texts.iter().map(|t| t.len() + 8).sum::<usize>() + 8,
        )
    }

    fn get_json_many(&mut self, h: Handle, names: Vec<String>) -> Wasm<Vec<Option<String>>> {
        self.read_many(
            &h,
            &names,
            |doc, name| doc.fields().get(name).map(Json::to_string),
            |json: &Option<String>| json.as_ref().map_or(8, |j| j.len() + 8),
        )
    }

    fn update(&mut self, h: Handle, changes: Vec<FieldChange>) -> Wasm<Result<(), FieldError>> {
        if changes.len() > MAX_PER_CALL {
            return Ok(Err(FieldError::TooLarge(format!(
                "{} changes in one update, more than the {MAX_PER_CALL} one update makes",
                changes.len()
            ))));
        }
        for FieldChange { name, change } in changes {
            let touch = match change {
                Change::Remove => Touch::Whole,
                _ => Touch::Field(&name),
            };
            let done = self.edit(&h, touch, |doc| {
                apply(doc, &name, change).map_err(|e| naming(&name, e))
            })?;
            if done.is_err() {
                return Ok(done);
            }
        }
        Ok(Ok(()))
    }
}
