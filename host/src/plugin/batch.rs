//! What an indexer's batches look like: the format its `start` asks for,
//! each document rendered to it, and what the backend answers.
//!
//! The host renders every document to the format, outside any call's
//! deadline: what that costs per document is bounded by the document and by
//! the format, whose names are capped in count ([`MAX_FORMAT_NAMES`]) and
//! in bytes ([`MAX_FORMAT_NAME_BYTES`]) when `start` answers it, and
//! looked up, never compared name by name.

use std::collections::HashSet;

use super::bindings::indexer::exports::weir::plugin::indexer_api::BatchEntry;
use crate::core::document::Document;

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

/// `doc` as the backend asked for it.
pub(crate) fn batch_entry(doc: &Document, format: &BatchFormat) -> BatchEntry {
    BatchEntry {
        id: doc.id().to_owned(),
        run_id: doc.run_id().map(str::to_owned),
        json: format
            .json
            .then(|| doc.to_json_string_shaped(format.fields.as_deref(), &format.omit)),
        picked: format
            .pick
            .iter()
            .map(|name| {
                doc.get_all(name)
                    .filter_map(crate::core::document::value_as_text)
                    .collect()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::{BatchFormat, FormatError, MAX_FORMAT_NAME_BYTES, MAX_FORMAT_NAMES};

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
        let entry = super::batch_entry(&doc, &format);
        assert_eq!(entry.json.as_deref(), Some(r#"{"a":1,"c":3}"#));
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
}
