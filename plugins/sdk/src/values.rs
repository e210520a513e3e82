//! Stages that change each value of some fields: which fields (in place, or
//! from a source to a target) and the batch loop that reads them all in one
//! call, maps each value and writes what changed in another.
//!
//! ```ignore
//! #[derive(serde::Deserialize)]
//! struct Config { #[serde(default)] fields: Vec<String>, #[serde(default)] mappings: Vec<FieldMapping>, max: usize }
//! // in start: let pairs = field_pairs(&config.fields, &config.mappings);
//! // in process_batch:
//! Ok(map_values(docs, &self.pairs, |value| match value {
//!     Json::String(s) => Ok(Some(Json::String(s.chars().take(max).collect()))),
//!     _ => Ok(None),
//! }))
//! ```

use serde_json::Value as Json;

use crate::{ConfigIssue, Document, FieldChange, FieldMapping, Outcome, PluginError, issue};

/// Which fields a value-mapping stage changes, from its `fields = [...]`
/// (changed in place) and `mappings = [{ source, target }]` (a source's
/// changed values written to a target, the source left as it is): the
/// (source, target) pairs, in place ones first, or the config issues.
pub fn field_pairs(
    fields: &[String],
    mappings: &[FieldMapping],
) -> Result<Vec<(String, String)>, Vec<ConfigIssue>> {
    let mut issues = Vec::new();
    if fields.is_empty() && mappings.is_empty() {
        issues.push(issue(
            "fields",
            "needs at least one field (or `mappings = [{ source, target }]`)",
        ));
    }
    for (i, name) in fields.iter().enumerate() {
        if name.is_empty() {
            issues.push(issue(format!("fields[{i}]"), "is empty"));
        }
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    Ok(fields
        .iter()
        .map(|f| (f.clone(), f.clone()))
        .chain(
            mappings
                .iter()
                .map(|m| (m.source.clone(), m.target.clone())),
        )
        .collect())
}

/// Map every value of each pair's source (each value of a multi-valued
/// field; nulls are left as they are) with `f`, and write the results to
/// its target: `Ok(None)` keeps a value as it is. A field changed in place
/// is written only when a value changed; a target always gets the source's
/// mapped values. An error fails the document, naming the field; the
/// changes before it are kept. Two host calls per batch.
pub fn map_values(
    docs: &[Document],
    pairs: &[(String, String)],
    mut f: impl FnMut(&Json) -> Result<Option<Json>, String>,
) -> Vec<Outcome> {
    let sources: Vec<String> = pairs.iter().map(|(s, _)| s.clone()).collect();
    crate::update_batch(docs, &sources, |_, answers| {
        let mut changes = Vec::new();
        for ((source, target), json) in pairs.iter().zip(answers) {
            let Some(json) = json else { continue };
            let fail = |e: String| Err(PluginError::Document(format!("`{source}`: {e}")));
            let value: Json = match serde_json::from_str(&json) {
                Ok(v) => v,
                Err(e) => return (changes, fail(e.to_string())),
            };
            let mut changed = false;
            let mapped = match value {
                Json::Array(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    for item in items {
                        match map_one(&mut f, item, &mut changed) {
                            Ok(v) => out.push(v),
                            Err(e) => return (changes, fail(e)),
                        }
                    }
                    Json::Array(out)
                }
                one => match map_one(&mut f, one, &mut changed) {
                    Ok(v) => v,
                    Err(e) => return (changes, fail(e)),
                },
            };
            if changed || source != target {
                changes.push(FieldChange::set_json(target.as_str(), mapped.to_string()));
            }
        }
        (changes, Ok(()))
    })
}

fn map_one(
    f: &mut impl FnMut(&Json) -> Result<Option<Json>, String>,
    value: Json,
    changed: &mut bool,
) -> Result<Json, String> {
    if value.is_null() {
        return Ok(value);
    }
    Ok(match f(&value)? {
        Some(new) => {
            *changed |= new != value;
            new
        }
        None => value,
    })
}

/// The text of a JSON value a stage reads as text: strings as they are,
/// numbers as written and booleans rendered; none for objects, arrays and
/// null.
pub fn text_of(value: &Json) -> Option<std::borrow::Cow<'_, str>> {
    match value {
        Json::String(s) => Some(std::borrow::Cow::Borrowed(s)),
        Json::Number(n) => Some(std::borrow::Cow::Owned(n.to_string())),
        Json::Bool(b) => Some(std::borrow::Cow::Owned(b.to_string())),
        _ => None,
    }
}

/// Whether `text[start..end]` stands as whole words: no letter, digit or
/// `_` right before or after it (for stages matching terms as words).
pub fn is_whole_word(text: &str, start: usize, end: usize) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(word) && !after.is_some_and(word)
}
