//! What an indexer's batches look like: the format its `start` asks for,
//! each document rendered to it, and what the backend answers.
//!
//! The host renders every document to the format, outside any call's
//! deadline: what that costs per document is bounded by the document and by
//! the format, whose names are capped in count ([`MAX_FORMAT_NAMES`]) and
//! in bytes ([`MAX_FORMAT_NAME_BYTES`]) when `start` answers it, and
//! looked up, never compared name by name.

use std::collections::HashSet;

use serde_json::Value;

use super::bindings::indexer::exports::weir::plugin::indexer_api::BatchEntry;
use crate::core::document::{DELETED_FIELD, Document, value_as_text};

/// What a deletion marker's `_deleted` holds when an indexer picks it.
static MARKED: Value = Value::Bool(true);

/// The values of field `name` of `doc` an indexer picks: `_deleted` is
/// `true` for a deletion marker (and absent otherwise).
///
/// `_weir_sweep` is picked only from the host's own sweep marker: a
/// document a connector or a stage gave that field (or a sweep marker's
/// id) is never taken by an indexer for a sweep.
pub(crate) fn picked_values<'d>(doc: &'d Document, name: &str) -> impl Iterator<Item = &'d Value> {
    let marked = (name == DELETED_FIELD && doc.is_deleted()).then_some(&MARKED);
    let forged = name == crate::core::sync::SWEEP_FIELD && !crate::core::sync::is_sweep(doc);
    doc.get_all(name).filter(move |_| !forged).chain(marked)
}

/// How an indexer wants its batches (what its `start` answered).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchFormat {
    /// Each document comes rendered as JSON text.
    pub json: bool,
    /// Only these fields (with `id` and `run_id`) are rendered.
    pub fields: Option<Vec<String>>,
    /// Names left out of the rendering.
    pub omit: HashSet<String>,
    /// Fields whose values come as text beside the JSON.
    pub pick: Vec<String>,
}

/// Why an indexer's batch format is refused (its `start` fails with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error(
        "its batch format lists {count} names in `{what}`, more than the {MAX_FORMAT_NAMES} allowed"
    )]
    TooManyNames { what: String, count: usize },
    #[error(
        "the names of its batch format (`fields`, `omit` and `pick`) add up to {bytes} bytes, more than the {MAX_FORMAT_NAME_BYTES} allowed"
    )]
    NamesTooLong { bytes: usize },
}

/// One document of a batch that the backend refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentFailure {
    /// Its position in the batch.
    pub index: usize,
    pub message: String,
    pub status: Option<u16>,
    /// The plugin says a later try may succeed.
    pub transient: bool,
}

/// Why a whole batch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BatchFailure {
    pub message: String,
    pub status: Option<u16>,
    pub connection_failed: bool,
}

/// Most names a batch format may list in each of `fields`, `omit` and `pick`.
pub const MAX_FORMAT_NAMES: usize = 1024;

/// Most bytes the names of a batch format may add up to, over `fields`,
/// `omit` and `pick` (64 KiB: a thousand names of 64 bytes): the host reads
/// each name for every document it renders.
pub const MAX_FORMAT_NAME_BYTES: usize = 64 << 10;

impl BatchFormat {
    /// Whether the backend deletes: it picks `_deleted`, the mark of a
    /// deletion marker. Markers are never sent to one that does not.
    pub fn deletes(&self) -> bool {
        self.pick.iter().any(|name| name == DELETED_FIELD)
    }

    /// Whether the backend sweeps after a full sync: it picks
    /// `_weir_sweep`, the mark of a sweep marker. Sweep markers are never
    /// sent to one that does not.
    pub fn sweeps(&self) -> bool {
        self.pick
            .iter()
            .any(|name| name == crate::core::sync::SWEEP_FIELD)
    }
}

impl BatchFormat {
    /// The format an indexer's `start` answered, with each list's repeats
    /// dropped (first kept), at most [`MAX_FORMAT_NAMES`] names in each and
    /// [`MAX_FORMAT_NAME_BYTES`] in all, and the omitted names taken out of
    /// `fields` once here rather than for every document.
    pub(crate) fn checked(
        json: bool,
        fields: Option<Vec<String>>,
        omit: Vec<String>,
        pick: Vec<String>,
    ) -> Result<Self, FormatError> {
        let unique = |what: &str, names: Vec<String>| {
            let mut seen = std::collections::HashSet::new();
            let names: Vec<String> = names
                .into_iter()
                .filter(|n| seen.insert(n.clone()))
                .collect();
            if names.len() > MAX_FORMAT_NAMES {
                return Err(FormatError::TooManyNames {
                    what: what.to_owned(),
                    count: names.len(),
                });
            }
            Ok(names)
        };
        let fields = fields.map(|f| unique("fields", f)).transpose()?;
        let omit: HashSet<String> = unique("omit", omit)?.into_iter().collect();
        let pick = unique("pick", pick)?;
        let bytes: usize = fields
            .iter()
            .flatten()
            .chain(&omit)
            .chain(&pick)
            .map(String::len)
            .sum();
        if bytes > MAX_FORMAT_NAME_BYTES {
            return Err(FormatError::NamesTooLong { bytes });
        }
        let fields = fields.map(|f| f.into_iter().filter(|n| !omit.contains(n)).collect());
        Ok(Self {
            json,
            fields,
            omit,
            pick,
        })
    }
}

/// `docs` rendered as the backend asked, handed to `send` as the batch's
/// entries. The entries borrow: ids, run ids and text values straight from
/// the documents, and only what must be rendered (JSON text, numbers,
/// booleans, nested values) is built, once per batch, beside them. So the
/// strings of a batch are copied once, into the guest, not first into the
/// host's own entries.
pub(crate) fn with_entries<R>(
    docs: &[Document],
    format: &BatchFormat,
    send: impl FnOnce(&[BatchEntry<'_>]) -> R,
) -> R {
    let json: Vec<Option<String>> = docs
        .iter()
        .map(|doc| {
            format
                .json
                .then(|| doc.to_json_string_shaped(format.fields.as_deref(), &format.omit))
        })
        .collect();
    // One pass over the picked values: text is borrowed, the rest rendered
    // aside and pointed to by its place there.
    let mut rendered: Vec<String> = Vec::new();
    let mut picked: Vec<Result<&str, usize>> = Vec::new();
    let mut ends: Vec<usize> = Vec::with_capacity(docs.len() * format.pick.len());
    for doc in docs {
        for name in &format.pick {
            for value in picked_values(doc, name) {
                if let Value::String(text) = value {
                    picked.push(Ok(text));
                } else if let Some(text) = value_as_text(value) {
                    picked.push(Err(rendered.len()));
                    rendered.push(text);
                }
            }
            ends.push(picked.len());
        }
    }
    let values: Vec<&str> = picked
        .into_iter()
        .map(|value| value.unwrap_or_else(|at| &rendered[at]))
        .collect();
    let mut start = 0;
    let fields: Vec<&[&str]> = ends
        .iter()
        .map(|&end| {
            let field = &values[start..end];
            start = end;
            field
        })
        .collect();
    let per_doc = format.pick.len();
    let entries: Vec<BatchEntry<'_>> = docs
        .iter()
        .zip(&json)
        .enumerate()
        .map(|(i, (doc, json))| BatchEntry {
            id: doc.id(),
            run_id: doc.run_id(),
            json: json.as_deref(),
            picked: &fields[i * per_doc..(i + 1) * per_doc],
        })
        .collect();
    send(&entries)
}

#[cfg(test)]
mod tests {
    use super::{BatchFormat, FormatError, MAX_FORMAT_NAME_BYTES, MAX_FORMAT_NAMES};
    use crate::core::document::Document;
    use crate::core::sync::SWEEP_FIELD;

    #[test]
    fn only_a_sweep_marker_is_picked_as_a_sweep() {
        // A record that merely holds the field, even skipping stages.
        let mut record = Document::new("r1");
        record
            .set(SWEEP_FIELD, serde_json::Value::Bool(true))
            .expect("a plain field");
        record.set_skip_stages(true);
        assert_eq!(super::picked_values(&record, SWEEP_FIELD).count(), 0);
        // The host's marker: a sweep's id and the field, as they travel.
        let mut marker = Document::new("_weir_sweep:p/s/c");
        marker
            .set(SWEEP_FIELD, serde_json::Value::Bool(true))
            .expect("a plain field");
        assert_eq!(
            super::picked_values(&marker, SWEEP_FIELD).collect::<Vec<_>>(),
            [&serde_json::Value::Bool(true)]
        );
    }

    #[test]
    fn a_batch_format_of_long_names_is_refused_at_start() {
        // Within the count, each name 1 KiB: 3 MiB that every document
        // would have been rendered against.
        let long = |tag: char| {
            (0..MAX_FORMAT_NAMES)
                .map(|i| format!("{}{i}", tag.to_string().repeat(1 << 10)))
                .collect::<Vec<_>>()
        };
        let error = BatchFormat::checked(true, Some(long('f')), long('o'), long('p'))
            .expect_err("too long");
        assert!(matches!(error, FormatError::NamesTooLong { .. }), "{error}");
        let text = error.to_string();
        assert!(
            text.contains(&format!("more than the {MAX_FORMAT_NAME_BYTES} allowed"))
                && text.contains("`fields`, `omit` and `pick`"),
            "{text}"
        );
        // Just within: one name of all the bytes.
        let one = vec!["n".repeat(MAX_FORMAT_NAME_BYTES)];
        BatchFormat::checked(false, None, Vec::new(), one).expect("at the limit");
        let over = vec!["n".repeat(MAX_FORMAT_NAME_BYTES + 1)];
        BatchFormat::checked(false, None, Vec::new(), over).expect_err("one byte over");
    }

    #[test]
    fn omitted_names_are_taken_out_of_the_fields_once() {
        let names = |list: &[&str]| list.iter().map(|&n| n.to_owned()).collect::<Vec<_>>();
        let format = BatchFormat::checked(
            true,
            Some(names(&["a", "b", "c"])),
            names(&["b", "id"]),
            Vec::new(),
        )
        .expect("ok");
        assert_eq!(format.fields, Some(names(&["a", "c"])));
        let doc = crate::core::document::Document::from_json(
            serde_json::json!({ "id": "d", "a": 1, "b": 2, "c": 3 }),
        )
        .expect("doc");
        let json = super::with_entries(&[doc], &format, |entries| {
            entries[0].json.map(str::to_owned)
        });
        assert_eq!(json.as_deref(), Some(r#"{"a":1,"c":3}"#));
    }

    #[test]
    fn a_batch_format_is_deduplicated_and_bounded() {
        let names = |n: usize| (0..n).map(|i| format!("f{}", i % 3)).collect::<Vec<_>>();
        let format =
            BatchFormat::checked(true, Some(names(10)), vec!["x".into(); 2], names(4)).expect("ok");
        assert_eq!(format.omit.len(), 1);
        assert_eq!(
            format.fields.as_deref(),
            Some(&["f0".to_owned(), "f1".into(), "f2".into()][..])
        );
        assert_eq!(format.pick, ["f0", "f1", "f2"]);
        let many: Vec<String> = (0..=MAX_FORMAT_NAMES).map(|i| format!("f{i}")).collect();
        let error = BatchFormat::checked(false, None, Vec::new(), many).expect_err("too many");
        assert!(error.to_string().contains("`pick`"), "{error}");
    }

    /// Picked values keep their order and text whether they come from the
    /// document as they are (text) or are rendered (numbers, booleans,
    /// nested JSON), nulls left out, a missing field empty, per document.
    #[test]
    fn picked_values_borrow_text_and_render_the_rest_in_order() {
        let format = BatchFormat::checked(
            false,
            None,
            Vec::new(),
            vec!["a".into(), "missing".into(), "b".into()],
        )
        .expect("ok");
        let docs = [
            // From text, so the number keeps the digits it was written with.
            serde_json::from_str(r#"{"id":"1","a":["x",1,null,true,{"k":[2]}, "y"],"b":2.50}"#)
                .expect("json"),
            serde_json::json!({ "id": "2", "a": null, "b": "text" }),
            serde_json::json!({ "id": "3" }),
        ]
        .map(|json| crate::core::document::Document::from_json(json).expect("doc"));
        let picked = super::with_entries(&docs, &format, |entries| {
            assert!(entries.iter().all(|e| e.json.is_none()));
            let ids: Vec<&str> = entries.iter().map(|e| e.id).collect();
            assert_eq!(ids, ["1", "2", "3"]);
            entries
                .iter()
                .map(|e| {
                    e.picked
                        .iter()
                        .map(|field| field.iter().map(|v| v.to_string()).collect::<Vec<_>>())
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        });
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            picked,
            [
                vec![
                    strings(&["x", "1", "true", r#"{"k":[2]}"#, "y"]),
                    vec![],
                    strings(&["2.50"]),
                ],
                vec![vec![], vec![], strings(&["text"])],
                vec![vec![], vec![], vec![]],
            ]
        );
    }
}
