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
use crate::{Document, FieldError, Mode, Outcome, PluginError, Value, doc_error};

pub use fields::{Change, FieldChange};

/// The most names the host reads, and changes it applies, in one call; also
/// the most documents of one [`get_json_each`] or [`update_each`] call.
const MAX_PER_CALL: usize = 4096;

/// The most answers one `get-json-each` gives (documents times names), and
/// the most changes one `update-each` makes in all.
const MAX_EACH: usize = 16 * MAX_PER_CALL;

/// [`Document::get_json_many`] of `names` for each of `docs`, in order, in
/// one host call for a batch (more only past 4,096 documents or 65,536
/// answers): one list of answers per document. The whole answer holds at
/// most what the documents hold (or a document's limit when that is more);
/// asking for more, the same big field many times say, stops the call.
pub fn get_json_each(docs: &[&Document], names: &[String]) -> Vec<Vec<Option<String>>> {
    if names.is_empty() {
        return docs.iter().map(|_| Vec::new()).collect();
    }
    assert!(
        names.len() <= MAX_PER_CALL,
        "get_json_each reads at most {MAX_PER_CALL} names per document"
    );
    let step = (MAX_EACH / names.len()).clamp(1, MAX_PER_CALL);
    docs.chunks(step)
        .flat_map(|chunk| fields::get_json_each(chunk, names))
        .collect()
}

/// [`Document::update`] of each document's changes, in order, in one host
/// call for a batch (more only past 4,096 documents or 65,536 changes): one
/// result per entry. A change that fails stops only its own document's
/// changes (those before it made); the other documents' are made. A
/// document with more than 4,096 changes is updated by itself, as
/// [`Document::update`] does it.
pub fn update_each(updates: &[(&Document, Vec<FieldChange>)]) -> Vec<Result<(), FieldError>> {
    let mut results = Vec::with_capacity(updates.len());
    let mut start = 0;
    while start < updates.len() {
        let (doc, changes) = &updates[start];
        if changes.len() > MAX_PER_CALL {
            results.push(doc.update(changes));
            start += 1;
            continue;
        }
        let (mut end, mut total) = (start, 0);
        while end < updates.len() && end - start < MAX_PER_CALL {
            let count = updates[end].1.len();
            total += count;
            if count > MAX_PER_CALL || total > MAX_EACH {
                break;
            }
            end += 1;
        }
        results.extend(fields::update_each(&updates[start..end]));
        start = end;
    }
    results
}

/// A batch stage's usual shape, in two host calls for the whole batch
/// instead of two per document: read `names` of every document as JSON text
/// ([`get_json_each`]), let `plan` say for each document what to change,
/// and apply every document's changes at once ([`update_each`]).
///
/// `plan` gets the document and its answers (one per name, in order) and
/// gives the changes, and how the document ends once they are made: an
/// error there fails it with the changes before the error kept, as when a
/// stage writes fields one by one and stops at one it cannot read. A change
/// the host refuses fails its document with the error naming the field.
/// `plan` may also read and write the document itself (a rare shape it
/// does not cover, say); those calls are made before the batch's update.
pub fn update_batch(
    docs: &[Document],
    names: &[String],
    mut plan: impl FnMut(&Document, Vec<Option<String>>) -> (Vec<FieldChange>, Result<(), PluginError>),
) -> Vec<Outcome> {
    let answers = if names.len() <= MAX_PER_CALL {
        let all: Vec<&Document> = docs.iter().collect();
        get_json_each(&all, names)
    } else {
        docs.iter().map(|doc| doc.get_json_many(names)).collect()
    };
    let mut updates = Vec::new();
    let mut updated = Vec::new();
    let mut ends = Vec::with_capacity(docs.len());
    for (i, (doc, answers)) in docs.iter().zip(answers).enumerate() {
        let (changes, end) = plan(doc, answers);
        if !changes.is_empty() {
            updates.push((doc, changes));
            updated.push(i);
        }
        ends.push(end);
    }
    for (i, result) in updated.into_iter().zip(update_each(&updates)) {
        if let Err(e) = result {
            ends[i] = Err(doc_error(e));
        }
    }
    ends.into_iter().map(Outcome::from).collect()
}

/// `read` of `names`, one call per [`MAX_PER_CALL`] names (one call for the
/// usual few), answers in order.
fn in_chunks<T>(names: &[String], read: impl Fn(&[String]) -> Vec<T>) -> Vec<T> {
    if names.len() <= MAX_PER_CALL {
        return read(names);
    }
    names.chunks(MAX_PER_CALL).flat_map(read).collect()
}

impl Document {
    /// [`get_all`](Document::get_all) of each of `names`, in order, in one
    /// call (one per 4,096 names, the most the host reads in a call): a
    /// field's values, one for a single-valued field, none when absent.
    pub fn get_all_many(&self, names: &[String]) -> Vec<Vec<Value>> {
        in_chunks(names, |chunk| fields::get_all_many(self, chunk))
    }

    /// [`get_strings`](Document::get_strings) of each of `names`, in order,
    /// in one call: values as text (numbers and booleans rendered, JSON as
    /// JSON text, nulls skipped).
    pub fn get_strings_many(&self, names: &[String]) -> Vec<Vec<String>> {
        in_chunks(names, |chunk| fields::get_strings_many(self, chunk))
    }

    /// [`get_json`](Document::get_json) of each of `names`, in order, in one
    /// call: the whole value as JSON text (an array for a multi-valued
    /// field), none when absent.
    pub fn get_json_many(&self, names: &[String]) -> Vec<Option<String>> {
        in_chunks(names, |chunk| fields::get_json_many(self, chunk))
    }

    /// Apply `changes` in order, as the one-field methods of the same names
    /// would, in one call (one per 4,096 changes, the most the host takes
    /// in a call; none for no changes). It stops at the first change that
    /// fails, with the changes before it applied; the error names the field.
    pub fn update(&self, changes: &[FieldChange]) -> Result<(), FieldError> {
        changes
            .chunks(MAX_PER_CALL)
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
