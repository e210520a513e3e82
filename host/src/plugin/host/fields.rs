//! The host side of the `fields` interface (contract 0.2.1): several fields
//! of a document read or changed in one call, each exactly as the
//! `document` method of the same name does it.
//!
//! A call's names and changes are bounded ([`MAX_PER_CALL`]), and so is what
//! a read answers: a plugin asking for one big field many times over would
//! otherwise make the host build an answer many times a document's size.
//!
//! `get-json-each` and `update-each` do the same for several documents (a
//! batch) in one call. Their answers and changes in all are bounded too
//! ([`MAX_EACH`]), and a read answers at most as much as the documents it
//! reads hold (each counted once), or a document's limit when that is more:
//! listing the same document 4,096 times, or the same big field 4,096 times,
//! makes the host refuse, not build, an answer 4,096 times its size. Each
//! handle is checked, and each change journaled for a batch that traps,
//! exactly as by the one-document calls (they share the code).

use serde_json::Value as Json;

use super::call_journal::Touch;
use super::convert::{from_wit, from_wit_all, to_wit};
use super::{Handle, PluginState, Wasm};
use crate::core::document::{self, Document};
use crate::core::limit::Limit;
use crate::plugin::bindings::batch_stage::weir::plugin::fields::{Change, FieldChange, Host};
use crate::plugin::bindings::{FieldError, Value};

/// The most names one read takes, the most changes one `update` makes, and
/// the most documents one `get-json-each`, `update-each` or `publish-packed`
/// takes.
pub(crate) const MAX_PER_CALL: usize = 4096;

/// The most answers one `get-json-each` gives (documents times names), and
/// the most changes one `update-each` makes in all: a batch of 4,096
/// documents, 16 fields each.
pub(crate) const MAX_EACH: usize = 16 * MAX_PER_CALL;

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
        let doc = self.doc(h)?;
        let mut total = 0usize;
        let mut answer = Vec::with_capacity(names.len());
        for name in names {
            let value = read(doc, name);
            total = total.saturating_add(bytes(&value));
            if total > max {
                let message = format!(
                    "asked for more than {max} bytes of fields in one call, more than a document may hold ({})",
                    Limit::MaxDocumentMib
                );
                return Err(self.budget.refuse(Limit::MaxDocumentMib, message));
            }
            answer.push(value);
        }
        Ok(answer)
    }

    /// Refuse (stop the call) a batch-wide call that asks for more than
    /// one takes: `count` of `what` against `most`.
    fn refuse_over(&mut self, count: usize, most: usize, what: &str) -> Wasm<()> {
        if count <= most {
            return Ok(());
        }
        let message = format!("{count} {what} in one call, more than the {most} one call takes");
        Err(self.budget.refuse(Limit::MaxDocumentMib, message))
    }

    /// Refuse a read of `names` names of each of `docs` that asks for more
    /// than one call takes; else how much its answer may hold
    /// ([`Self::readable_bytes`]).
    pub(super) fn each_read_bounds(&mut self, docs: &[Handle], names: usize) -> Wasm<usize> {
        self.refuse_over(docs.len(), MAX_PER_CALL, "documents")?;
        self.refuse_over(names, MAX_PER_CALL, "field names")?;
        self.refuse_over(
            docs.len() * names,
            MAX_EACH,
            "answers (documents times names)",
        )?;
        self.readable_bytes(docs)
    }

    /// The refusal of a read whose answer grew past `max` bytes.
    pub(super) fn refuse_answer_over(&mut self, max: usize) -> wasmtime::Error {
        let message = format!(
            "asked for more than {max} bytes of fields in one call, more than the documents read hold (or a document may hold: {})",
            Limit::MaxDocumentMib
        );
        self.budget.refuse(Limit::MaxDocumentMib, message)
    }

    /// How much one read of `docs` may answer, as documents are measured:
    /// what they hold (each document once, however often it is listed),
    /// or a document's limit when that is more.
    fn readable_bytes(&self, docs: &[Handle]) -> Wasm<usize> {
        let mut reps: Vec<(u32, usize)> = docs.iter().map(Handle::rep).zip(0..).collect();
        reps.sort_unstable();
        reps.dedup_by_key(|(rep, _)| *rep);
        let mut held = 0usize;
        for (_, at) in reps {
            held = held.saturating_add(self.doc(&docs[at])?.approx_json_bytes());
        }
        Ok(held.max(self.budget.doc_limits.max_bytes))
    }

    /// `update` of the document behind `h`: `changes` in order, stopping
    /// at the first that fails. Each change is checked, charged and
    /// journaled as the one-field method of its name does it.
    fn update_one(
        &mut self,
        h: &Handle,
        changes: Vec<FieldChange>,
    ) -> Wasm<Result<(), FieldError>> {
        if changes.len() > MAX_PER_CALL {
            return Ok(Err(FieldError::TooLarge(format!(
                "{} changes in one update, more than the {MAX_PER_CALL} one update makes",
                changes.len()
            ))));
        }
        for FieldChange { name, change } in changes {
            let done = match change {
                Change::Remove => self.edit(h, Touch::Whole, |doc| doc.remove(&name).map(drop)),
                Change::Add(value) => self.edit(h, Touch::Field(&name), |doc| {
                    doc.add(&name, from_wit(value, doc.limits().max_bytes)?)
                }),
                Change::Set(value) => self.replace(h, &name, |max| from_wit(value, max)),
                Change::SetAll(values) => self.replace(h, &name, |max| from_wit_all(values, max)),
                Change::SetJson(json) => {
                    self.replace(h, &name, |max| document::parse_value_within(&json, max))
                }
            }?;
            if let Err(e) = done {
                return Ok(Err(naming(&name, e)));
            }
        }
        Ok(Ok(()))
    }
}

/// About how many bytes a WIT value takes.
fn wit_bytes(value: &Value) -> usize {
    match value {
        Value::Text(s) | Value::Number(s) | Value::Json(s) => s.len() + 8,
        _ => 8,
    }
}

/// `error` as the error of the change to field `name` (a reserved name
/// names itself).
pub(super) fn naming(name: &str, error: FieldError) -> FieldError {
    use FieldError as E;
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
        self.update_one(&h, changes)
    }

    fn get_json_each(
        &mut self,
        docs: Vec<Handle>,
        names: Vec<String>,
    ) -> Wasm<Vec<Vec<Option<String>>>> {
        let max = self.each_read_bounds(&docs, names.len())?;
        let mut total = 0usize;
        let mut answer = Vec::with_capacity(docs.len());
        for h in &docs {
            let doc = self.doc(h)?;
            let mut row = Vec::with_capacity(names.len());
            for name in &names {
                let value = doc.fields().get(name.as_str());
                total = total.saturating_add(value.map_or(0, document::value_bytes));
                if total > max {
                    return Err(self.refuse_answer_over(max));
                }
                row.push(value.map(Json::to_string));
            }
            answer.push(row);
        }
        Ok(answer)
    }

    fn update_each(
        &mut self,
        updates: Vec<(Handle, Vec<FieldChange>)>,
    ) -> Wasm<Vec<Result<(), FieldError>>> {
        self.refuse_over(updates.len(), MAX_PER_CALL, "documents")?;
        let changes = updates.iter().map(|(_, c)| c.len()).sum();
        self.refuse_over(changes, MAX_EACH, "changes")?;
        updates
            .into_iter()
            .map(|(h, changes)| self.update_one(&h, changes))
            .collect()
    }

    fn get_json_each_text(&mut self, docs: Vec<Handle>, names: Vec<String>) -> Wasm<String> {
        let answer = self.get_json_each(docs, names)?;
        Ok(serde_json::to_string(&answer)?)
    }

    fn update_each_text(
        &mut self,
        docs: Vec<Handle>,
        changes: String,
    ) -> Wasm<Vec<Result<(), FieldError>>> {
        let updates = match text::changes_of(docs, &changes) {
            Ok(updates) => updates,
            Err(message) => return Err(self.budget.refuse(Limit::MaxDocumentMib, message)),
        };
        self.update_each(updates)
    }
}

mod text;

#[cfg(test)]
mod tests;
