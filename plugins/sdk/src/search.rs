//! What indexers for search engines share: how nested children are sent,
//! and the dense vector fields they set up (`vectors`).

use serde_json::{Map, Value as Json};

/// How a backend gets a document's nested children (`_children` in the
/// host's JSON), the `children` setting.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Children {
    /// Inside their parent, under the backend's field for them.
    #[default]
    Nested,
    /// Each as a document of its own, after its parent, naming it.
    Separate,
}

/// A document's JSON shaped for a backend: the parent, and with
/// [`Children::Separate`] its children (grandchildren too) as
/// `(id, parent id, JSON)`, depth first in order.
#[derive(Debug, Default, PartialEq)]
pub struct Shaped {
    pub parent: String,
    pub separate: Vec<(String, String, String)>,
}

/// Shape `json` (a document as the host renders it): nested children move
/// to `children_field`; separate ones come out whole, each with
/// `parent_field` set to its parent's id. A document without children is
/// passed through unparsed.
pub fn shape(
    json: &str,
    id: &str,
    children: Children,
    children_field: &str,
    parent_field: &str,
) -> Result<Shaped, String> {
    // A key is always a quoted string: `"_children":` cannot occur inside
    // a string value, where quotes are escaped.
    if !json.contains("\"_children\":") {
        return Ok(Shaped {
            parent: json.to_owned(),
            separate: Vec::new(),
        });
    }
    let mut doc: Map<String, Json> =
        serde_json::from_str(json).map_err(|e| format!("the host sent bad JSON: {e}"))?;
    match children {
        Children::Nested => {
            if children_field != "_children" {
                rename_children(&mut doc, children_field);
            }
            Ok(Shaped {
                parent: Json::Object(doc).to_string(),
                separate: Vec::new(),
            })
        }
        Children::Separate => {
            let mut separate = Vec::new();
            flatten(&mut doc, id, parent_field, &mut separate)?;
            Ok(Shaped {
                parent: Json::Object(doc).to_string(),
                separate,
            })
        }
    }
}

/// Move `_children` to `field`, in this document and its descendants.
fn rename_children(doc: &mut Map<String, Json>, field: &str) {
    if let Some(mut children) = doc.remove("_children") {
        if let Json::Array(list) = &mut children {
            for child in list {
                if let Json::Object(child) = child {
                    rename_children(child, field);
                }
            }
        }
        doc.insert(field.to_owned(), children);
    }
}

fn flatten(
    doc: &mut Map<String, Json>,
    id: &str,
    parent_field: &str,
    out: &mut Vec<(String, String, String)>,
) -> Result<(), String> {
    let Some(Json::Array(children)) = doc.remove("_children") else {
        return Ok(());
    };
    for child in children {
        let Json::Object(mut child) = child else {
            return Err(format!("a child of `{id}` is not an object"));
        };
        let child_id = match child.get("id") {
            Some(Json::String(child_id)) => child_id.clone(),
            _ => return Err(format!("a child of `{id}` has no string id")),
        };
        let mut grandchildren = Vec::new();
        flatten(&mut child, &child_id, parent_field, &mut grandchildren)?;
        child.insert(parent_field.to_owned(), Json::String(id.to_owned()));
        out.push((child_id, id.to_owned(), Json::Object(child).to_string()));
        out.extend(grandchildren);
    }
    Ok(())
}

/// Whether a document is marked for deletion: one of the values of its
/// deletion field (as `batch-entry.picked` gives them) is `value`.
pub fn marked(values: Option<&Vec<String>>, value: &str) -> bool {
    values.is_some_and(|values| values.iter().any(|v| v == value))
}

/// Whether an entry is a deletion marker: its picked `_deleted` (see
/// [`crate::DELETED_FIELD`]) has a value.
pub fn is_marker(picked: Option<&Vec<String>>) -> bool {
    picked.is_some_and(|values| !values.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"id":"p","t":"say \"_children\": no","_children":[{"id":"c1","_children":[{"id":"g"}]},{"id":"c2"}]}"#;

    #[test]
    fn a_document_without_children_passes_unparsed() {
        let json = r#"{"id":"p","t":"a \"_children\": b"}"#;
        let shaped = shape(json, "p", Children::Separate, "kids", "parent").expect("shape");
        assert_eq!(shaped.parent, json);
        assert!(shaped.separate.is_empty());
    }

    #[test]
    fn nested_children_move_to_the_backends_field_at_every_level() {
        let shaped = shape(DOC, "p", Children::Nested, "kids", "parent").expect("shape");
        assert_eq!(
            shaped.parent,
            r#"{"id":"p","t":"say \"_children\": no","kids":[{"id":"c1","kids":[{"id":"g"}]},{"id":"c2"}]}"#
        );
    }

    #[test]
    fn separate_children_come_out_depth_first_naming_their_parent() {
        let shaped = shape(DOC, "p", Children::Separate, "kids", "parent").expect("shape");
        assert_eq!(shaped.parent, r#"{"id":"p","t":"say \"_children\": no"}"#);
        let ids: Vec<_> = shaped
            .separate
            .iter()
            .map(|(id, parent, _)| (id.as_str(), parent.as_str()))
            .collect();
        assert_eq!(ids, [("c1", "p"), ("g", "c1"), ("c2", "p")]);
        assert_eq!(shaped.separate[1].2, r#"{"id":"g","parent":"c1"}"#);
    }

    #[test]
    fn vector_field_names_are_plain_and_listed_once() {
        let field = |name: &str| VectorField {
            field: name.to_owned(),
            dimensions: 4,
            similarity: Similarity::Cosine,
        };
        assert!(check_vector_fields(&[field("embedding"), field("chunk.vec_2-a")], 8).is_empty());
        let long = "v".repeat(256);
        for bad in [
            "", "a b", "a%2Fb", "a&b=c", "a/b", "x?", "é", ".hidden", "-x", &long,
        ] {
            let issues = check_vector_fields(&[field(bad)], 8);
            assert_eq!(issues.len(), 1, "{bad:?} was accepted");
        }
        assert_eq!(check_vector_fields(&[field("v"), field("v")], 8).len(), 1);
        assert_eq!(
            check_vector_fields(
                &[VectorField {
                    dimensions: 9,
                    ..field("v")
                }],
                8
            )
            .len(),
            1
        );
    }

    #[test]
    fn a_child_without_an_id_is_an_error() {
        let json = r#"{"id":"p","_children":[{"x":1}]}"#;
        assert!(shape(json, "p", Children::Separate, "k", "parent").is_err());
    }
}

/// A dense vector field an indexer sets up: an entry of its `vectors`
/// setting, `{ field, dimensions, similarity }`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VectorField {
    /// The field holding each document's vector (a list of numbers).
    pub field: String,
    /// How many numbers each vector has: the embedding model's size.
    pub dimensions: usize,
    /// How vectors are compared.
    #[serde(default)]
    pub similarity: Similarity,
}

/// How a vector field compares vectors (each engine has its own names).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Similarity {
    /// The cosine of the angle between two vectors.
    #[default]
    Cosine,
    /// The dot product (for vectors of unit length, the same order as cosine).
    DotProduct,
    /// The Euclidean (L2) distance.
    Euclidean,
}

/// Config issues of a `vectors` setting, for an engine taking vectors of at
/// most `max_dimensions`.
pub fn check_vector_fields(
    vectors: &[VectorField],
    max_dimensions: usize,
) -> Vec<crate::ConfigIssue> {
    let mut issues = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        // The name goes into URL paths (Solr's Schema API) and mappings:
        // only characters that mean nothing there, and at most 255 bytes.
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if v.field.is_empty()
            || v.field.len() > 255
            || !v.field.chars().all(plain)
            || v.field.starts_with(['.', '-'])
        {
            issues.push(crate::issue(
                format!("vectors[{i}].field"),
                "must be a field name of ASCII letters, digits, `_`, `-` and `.` (not first), \
                 at most 255 bytes",
            ));
        }
        if !(1..=max_dimensions).contains(&v.dimensions) {
            issues.push(crate::issue(
                format!("vectors[{i}].dimensions"),
                format!("must be from 1 to {max_dimensions}"),
            ));
        }
        if vectors[..i].iter().any(|w| w.field == v.field) {
            issues.push(crate::issue(
                format!("vectors[{i}].field"),
                "is listed twice",
            ));
        }
    }
    issues
}

/// A document's vector fields checked before the engine sees them: each
/// present one must be a list of `dimensions` numbers. (Engines answer a
/// vector of another size with an error that may fail the whole batch.)
pub fn check_vectors(vectors: &[VectorField], json: &str) -> Result<(), String> {
    if vectors.is_empty() {
        return Ok(());
    }
    let doc: Json = serde_json::from_str(json)
        .map_err(|e| format!("the host sent JSON that does not parse: {e}"))?;
    for v in vectors {
        let Some(value) = doc.get(&v.field) else {
            continue;
        };
        match value.as_array().filter(|a| a.iter().all(Json::is_number)) {
            Some(a) if a.len() == v.dimensions => {}
            Some(a) => {
                return Err(format!(
                    "vector field `{}` holds {} numbers, not the {} its field takes",
                    v.field,
                    a.len(),
                    v.dimensions
                ));
            }
            None => {
                return Err(format!(
                    "vector field `{}` is not a list of numbers",
                    v.field
                ));
            }
        }
    }
    Ok(())
}
