//! What an indexer's batches look like: the format its `start` asks for,
//! each document rendered to it, and what the backend answers.

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
    pub omit: Vec<String>,
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

impl BatchFormat {
    /// The format an indexer's `start` answered, with each list's repeats
    /// dropped (first kept) and at most [`MAX_FORMAT_NAMES`] names in each:
    /// what the host renders per document is bounded by the documents.
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
        Ok(Self {
            json,
            fields: fields.map(|f| unique("fields", f)).transpose()?,
            omit: unique("omit", omit)?,
            pick: unique("pick", pick)?,
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
    use super::{BatchFormat, MAX_FORMAT_NAMES};

    #[test]
    fn a_batch_format_is_deduplicated_and_bounded() {
        let names = |n: usize| (0..n).map(|i| format!("f{}", i % 3)).collect::<Vec<_>>();
        let format = BatchFormat::checked(true, Some(names(10)), names(5), names(4)).expect("ok");
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
