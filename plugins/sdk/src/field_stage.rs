//! Stages that read and change named fields, with the batch's fields
//! crossing packed (contract 0.2.4, `lending-packed`).
//!
//! Most stages read a few fields the config names and write a few back.
//! [`BatchStage`](crate::BatchStage)s do that with a handle per document and
//! a string per value crossing each way; a [`FieldStage`] says once which
//! fields it reads ([`FieldStage::reads`]) and gets, per batch, all their
//! JSON texts in one string, and hands all its changes back in another
//! (about half what a small stage costs per document, measured by the
//! `local_pipeline` bench). [`export_field_stage!`](crate::export_field_stage)
//! exports it through the `packing-stage` world; a host that does not lend
//! batches by position calls `process-batch`, which this module answers the
//! [`update_batch`] way, with the same plans.

use std::cell::OnceCell;

use crate::bindings::field_stage::weir::plugin::lending::Batch;
use crate::bindings::field_stage::weir::plugin::lending_packed::{self, PackedChanges};
use crate::update_batch;
use crate::{Change, ConfigIssue, Document, FieldChange, Outcome, PluginError, Value, doc_error};

/// The length that stands for a piece that is not there: a field the
/// document lacks, the value of a removal.
const ABSENT: u32 = u32::MAX;

/// The most answers one `get-packed` gives (documents times names), and
/// the most changes one `update-packed` makes.
const MAX_EACH: usize = 16 * 4096;

/// A stage that reads the fields it names and says what to change in each
/// document, exported with [`export_field_stage!`](crate::export_field_stage).
///
/// A batch holds from one document up; the host may split or regroup
/// batches at any time, so a document's plan must not depend on which
/// others share its batch.
pub trait FieldStage: Sized + 'static {
    /// The stage's settings, parsed from the pipeline config.
    type Config: serde::de::DeserializeOwned;
    /// Checks beyond parsing (ranges, regex syntax, ...), all reported at once.
    fn check(_config: &Self::Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    /// Build the stage from its settings.
    fn start(config: Self::Config) -> Result<Self, String>;
    /// The fields [`plan`](FieldStage::plan) is given of every document, in
    /// this order (none: it reads what it needs through the document).
    fn reads(&self) -> &[String];
    /// Say in `changes` what to change in one document whose
    /// [`reads`](FieldStage::reads) hold `fields` (each field's JSON text,
    /// as `Document::get_json` gives it, or none when absent), and how the
    /// document ends once they are made: an error fails it, with the
    /// changes said before the error kept.
    ///
    /// `doc` gives the document itself for what `fields` do not cover (the
    /// rare value its JSON text does not settle, say); what is written
    /// through it is written before `changes`. A change the host refuses
    /// fails the document with the error naming the field.
    fn plan(
        &mut self,
        fields: &[Option<&str>],
        doc: &Lent<'_>,
        changes: &mut Changes<'_>,
    ) -> Result<(), PluginError>;
    fn stop(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}

/// The document a [`FieldStage::plan`] is about, made a handle only when
/// the plan asks for it.
pub struct Lent<'a> {
    at: At<'a>,
    handle: OnceCell<Document>,
}

enum At<'a> {
    /// Lent as a handle (`process-batch`).
    Handle(&'a Document),
    /// At a position of a batch lent by position (`process-lent`).
    Position(&'a Batch, u32),
}

impl Lent<'_> {
    /// The document, as a handle (one host call the first time for a batch
    /// lent by position).
    pub fn document(&self) -> &Document {
        match self.at {
            At::Handle(doc) => doc,
            At::Position(batch, at) => self.handle.get_or_init(|| batch.document(at)),
        }
    }
}

/// `process-batch` of a [`FieldStage`]: a handle per document, the fields
/// read and written as [`update_batch`] does.
#[doc(hidden)]
pub fn __field_batch<S: FieldStage>(stage: &mut S, docs: &[Document]) -> Vec<Outcome> {
    let names = stage.reads().to_vec();
    update_batch(docs, &names, |doc, answers| {
        let fields: Vec<Option<&str>> = answers.iter().map(Option::as_deref).collect();
        let mut changes = Changes {
            sink: Sink::Listed(Vec::new()),
        };
        let end = stage.plan(&fields, &Lent::handle(doc), &mut changes);
        (changes.listed().unwrap_or_default(), end)
    })
}

/// `process-lent` of a [`FieldStage`]: the batch's fields read in one host
/// call, planned document by document, and the changes made in another.
/// Answers the documents that failed, by position.
#[doc(hidden)]
pub fn __field_lent<S: FieldStage>(stage: &mut S, batch: &Batch) -> Vec<(u32, PluginError)> {
    let size = batch.size();
    let read = Read::of(batch, stage.reads(), size as usize);
    let mut changes = Packer::default();
    let mut ends: Vec<Option<PluginError>> = Vec::with_capacity(size as usize);
    let mut fields = Vec::new();
    for at in 0..size {
        read.fields_of(at as usize, &mut fields);
        let lent = Lent {
            at: At::Position(batch, at),
            handle: OnceCell::new(),
        };
        let mut planned = Changes {
            sink: Sink::Packed {
                packer: &mut changes,
                at,
                from: None,
            },
        };
        let mut end = stage.plan(&fields, &lent, &mut planned).err();
        if let Some(listed) = planned.listed() {
            // A change the packed text does not carry: the document's
            // changes go through its handle, in order.
            if let Err(e) = lent.document().update(&listed) {
                end = Some(doc_error(e));
            }
        }
        ends.push(end);
    }
    for (at, error) in changes.send(batch) {
        ends[at as usize] = Some(doc_error(error));
    }
    (0..)
        .zip(ends)
        .filter_map(|(at, end)| end.map(|e| (at, e)))
        .collect()
}

impl<'a> Lent<'a> {
    fn handle(doc: &'a Document) -> Self {
        Self {
            at: At::Handle(doc),
            handle: OnceCell::new(),
        }
    }
}

/// What `get-packed` answered for a batch, one [`Answer`] a call (names
/// are read in as few calls as the bounds allow).
struct Read {
    calls: Vec<Answer>,
}

/// One `get-packed` answer: its text, where each piece starts and ends
/// (document after document, name after name), and how many names it read.
struct Answer {
    text: String,
    pieces: Vec<Option<(usize, usize)>>,
    names: usize,
}

impl Read {
    /// `names` of every document of `batch` (`size` of them).
    fn of(batch: &Batch, names: &[String], size: usize) -> Self {
        let step = (MAX_EACH / size.max(1)).clamp(1, 4096);
        let calls = names
            .chunks(step)
            .map(|chunk| {
                let packed = lending_packed::get_packed(batch, chunk);
                let mut start = 0;
                let pieces = packed
                    .lengths
                    .iter()
                    .map(|&length| {
                        (length != ABSENT).then(|| {
                            let piece = (start, start + length as usize);
                            start = piece.1;
                            piece
                        })
                    })
                    .collect();
                Answer {
                    text: packed.text,
                    pieces,
                    names: chunk.len(),
                }
            })
            .collect();
        Self { calls }
    }

    /// The fields read of the document at `at`, in the order of the names.
    fn fields_of<'r>(&'r self, at: usize, fields: &mut Vec<Option<&'r str>>) {
        fields.clear();
        for Answer {
            text,
            pieces,
            names,
        } in &self.calls
        {
            let row = &pieces[at * names..(at + 1) * names];
            fields.extend(row.iter().map(|piece| piece.map(|(s, e)| &text[s..e])));
        }
    }
}

/// Changes packed for `update-packed`.
#[derive(Default)]
struct Packer {
    text: Vec<u8>,
    numbers: Vec<u32>,
}

/// The changes a [`FieldStage::plan`] makes to its document, in order:
/// packed with the batch's (`set_json`, `set_text`, `set_texts`, `remove`),
/// or, once a change the packed text does not carry is [`push`](Changes::push)ed,
/// all of the document's through its handle.
pub struct Changes<'p> {
    sink: Sink<'p>,
}

enum Sink<'p> {
    /// Packed for the batch's `update-packed`, for the document at `at`;
    /// `from` marks where its first change starts.
    Packed {
        packer: &'p mut Packer,
        at: u32,
        from: Option<(usize, usize)>,
    },
    /// Listed, to be made through the document's handle.
    Listed(Vec<FieldChange>),
}

impl Changes<'_> {
    /// As `Document::set_json`: `name` becomes the JSON value `json` (an
    /// array makes it multi-valued).
    pub fn set_json(&mut self, name: &str, json: &str) {
        self.change(
            name,
            Some(|text: &mut Vec<u8>| text.extend_from_slice(json.as_bytes())),
            || FieldChange::set_json(name, json),
        );
    }

    /// As `Document::set_string`: `name` becomes single-valued with `text`.
    pub fn set_text(&mut self, name: &str, text: &str) {
        self.change(
            name,
            Some(|out: &mut Vec<u8>| json_string(out, text)),
            || FieldChange::set_string(name, text),
        );
    }

    /// As `Document::set_all` of text values: `name` becomes multi-valued
    /// with exactly `texts`.
    pub fn set_texts<'t>(&mut self, name: &str, texts: impl IntoIterator<Item = &'t str>) {
        let texts: Vec<&str> = texts.into_iter().collect();
        self.change(
            name,
            Some(|out: &mut Vec<u8>| {
                out.push(b'[');
                for (i, text) in texts.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    json_string(out, text);
                }
                out.push(b']');
            }),
            || {
                let values = texts.iter().map(|t| Value::Text((*t).to_owned())).collect();
                FieldChange::set_all(name, values)
            },
        );
    }

    /// As `Document::remove`: `name` is removed; nothing when absent.
    pub fn remove(&mut self, name: &str) {
        self.change(name, None::<fn(&mut Vec<u8>)>, || FieldChange::remove(name));
    }

    /// Any change: those the packed text does not carry (`add`, a value
    /// other than text) send all of the document's changes, in order,
    /// through its handle.
    pub fn push(&mut self, change: FieldChange) {
        let FieldChange { name, change } = change;
        match change {
            Change::SetJson(json) => self.set_json(&name, &json),
            Change::Set(Value::Text(text)) => self.set_text(&name, &text),
            Change::Remove => self.remove(&name),
            Change::SetAll(values) if values.iter().all(|v| matches!(v, Value::Text(_))) => {
                let texts = values.iter().filter_map(|v| match v {
                    Value::Text(text) => Some(text.as_str()),
                    _ => None,
                });
                self.set_texts(&name, texts);
            }
            change => self.list().push(FieldChange { name, change }),
        }
    }

    /// Several changes, in order, as [`push`](Changes::push) makes each.
    pub fn extend(&mut self, changes: impl IntoIterator<Item = FieldChange>) {
        changes.into_iter().for_each(|change| self.push(change));
    }

    /// A change that sets `name` to the JSON `write` appends (none: removes
    /// it), or, when the document's changes are listed, `listed`.
    fn change(
        &mut self,
        name: &str,
        write: Option<impl FnOnce(&mut Vec<u8>)>,
        listed: impl FnOnce() -> FieldChange,
    ) {
        match &mut self.sink {
            Sink::Packed { packer, at, from } => {
                from.get_or_insert((packer.text.len(), packer.numbers.len()));
                packer.text.extend_from_slice(name.as_bytes());
                let start = packer.text.len();
                let json = match write {
                    Some(write) => {
                        write(&mut packer.text);
                        length(packer.text.len() - start)
                    }
                    None => ABSENT,
                };
                packer.numbers.extend([*at, length(name.len()), json]);
            }
            Sink::Listed(list) => list.push(listed()),
        }
    }

    /// The document's changes as a list, the packed ones taken back out.
    fn list(&mut self) -> &mut Vec<FieldChange> {
        if let Sink::Packed { packer, from, .. } = &mut self.sink {
            let taken = from.map(|from| packer.take_back(from)).unwrap_or_default();
            self.sink = Sink::Listed(taken);
        }
        match &mut self.sink {
            Sink::Listed(list) => list,
            Sink::Packed { .. } => unreachable!("listed above"),
        }
    }

    /// The changes to make through the document's handle, if they are
    /// listed rather than packed.
    fn listed(self) -> Option<Vec<FieldChange>> {
        match self.sink {
            Sink::Listed(list) => Some(list),
            Sink::Packed { .. } => None,
        }
    }
}

impl Packer {
    /// The changes packed since `from` (text bytes, numbers), taken back
    /// out as a list.
    fn take_back(&mut self, (text_from, numbers_from): (usize, usize)) -> Vec<FieldChange> {
        let text = String::from_utf8(self.text.split_off(text_from))
            .expect("names and JSON texts are UTF-8");
        let mut start = 0;
        let mut piece = |length: u32| {
            let piece = &text[start..start + length as usize];
            start += length as usize;
            piece
        };
        let changes = self.numbers[numbers_from..]
            .chunks_exact(3)
            .map(|change| {
                let name = piece(change[1]);
                match change[2] {
                    ABSENT => FieldChange::remove(name),
                    json => FieldChange::set_json(name, piece(json)),
                }
            })
            .collect();
        self.numbers.truncate(numbers_from);
        changes
    }

    /// Make the packed changes, as many calls as the bounds need: the
    /// documents whose change failed, by position, with the error. A
    /// document that failed in one call has none of its later changes
    /// sent in the next.
    fn send(self, batch: &Batch) -> Vec<(u32, crate::FieldError)> {
        let text = String::from_utf8(self.text).expect("names and JSON texts are UTF-8");
        if self.numbers.is_empty() {
            return Vec::new();
        }
        if self.numbers.len() <= 3 * MAX_EACH {
            let call = PackedChanges {
                text,
                changes: self.numbers,
            };
            return lending_packed::update_packed(batch, &call);
        }
        let mut failed = Vec::new();
        let mut call = PackedChanges {
            text: String::new(),
            changes: Vec::new(),
        };
        let mut start = 0;
        for change in self.numbers.chunks_exact(3) {
            let json = if change[2] == ABSENT {
                0
            } else {
                change[2] as usize
            };
            let end = start + change[1] as usize + json;
            if !failed.iter().any(|(at, _)| *at == change[0]) {
                call.text.push_str(&text[start..end]);
                call.changes.extend_from_slice(change);
            }
            start = end;
            if call.changes.len() == 3 * MAX_EACH {
                failed.extend(lending_packed::update_packed(batch, &call));
                call.text.clear();
                call.changes.clear();
            }
        }
        if !call.changes.is_empty() {
            failed.extend(lending_packed::update_packed(batch, &call));
        }
        failed
    }
}

/// `text` as a JSON string, appended to `out`.
fn json_string(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).expect("a string always renders");
}

fn length(bytes: usize) -> u32 {
    u32::try_from(bytes).expect("a change's text is under 4 GiB")
}
