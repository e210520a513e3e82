//! The changes of `update-each-text`: one JSON text for a whole batch, for
//! guests whose bindings pay for each string and list element that crosses
//! more than for its bytes (JavaScript's: microseconds each, measured by
//! the `languages` bench), turned into the changes `update-each` makes.

use super::{Change, FieldChange, Handle, MAX_PER_CALL};

/// One document's changes as the text carries them: `[name, json]`, `json`
/// absent (`null`) for a removal.
type Pairs = Vec<(String, Option<String>)>;

/// The changes of `text` for each of `docs`, or why `text` is not
/// `[[[name, json-or-null], ...], ...]` with an entry per document. The
/// changes are counted by `update-each` after; more documents than a call
/// takes are refused before the text is parsed.
pub(super) fn changes_of(
    docs: Vec<Handle>,
    text: &str,
) -> Result<Vec<(Handle, Vec<FieldChange>)>, String> {
    // More documents than a call takes: refused before the text is read.
    if docs.len() > MAX_PER_CALL {
        return Err(format!(
            "{} documents in one call, more than the {MAX_PER_CALL} one call takes",
            docs.len()
        ));
    }
    let each: Vec<Pairs> = serde_json::from_str(text).map_err(|e| {
        format!("the changes are not JSON of `[[[name, json or null], ...], ...]`, one array per document: {e}")
    })?;
    if each.len() != docs.len() {
        return Err(format!(
            "the changes are for {} documents, not the {} the call lists",
            each.len(),
            docs.len()
        ));
    }
    Ok(docs
        .into_iter()
        .zip(each)
        .map(|(doc, pairs)| {
            let changes = pairs
                .into_iter()
                .map(|(name, json)| FieldChange {
                    name,
                    change: json.map_or(Change::Remove, Change::SetJson),
                })
                .collect();
            (doc, changes)
        })
        .collect())
}
