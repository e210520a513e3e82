//! emit-nested-children's settings: what the plugin parses, and what the
//! plugin reference (docs/plugin-reference.md) is generated from.

/// Turn each object of an array field into a child document.
///
/// The children are separate documents, processed by the rest of the
/// pipeline ahead of their parent. Each value of `source` (one for a
/// single-valued field) must be a JSON object; its keys become the child's
/// fields, except `id`, `run_id` and `_children`, which a document cannot
/// hold as fields and are left out. A value that is not an object fails the
/// parent with an error naming its index, and no child is made. A parent
/// without `source`, or with an empty list there, makes no child and keeps
/// the field. A document may make as many children as the plugin's
/// `limits.max_children`. Each child costs a host call (two with
/// `parent_field`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field holding the objects.
    pub source: String,
    /// A key of each object whose value (a text, or a number as written) is
    /// the child's id; it stays a field of the child too (unless it is
    /// `id`). Unset, or when an object lacks it or holds an empty text, null
    /// or another kind of value there, the id is `<parent id>-<index>`, the
    /// index counting from 0. Two children of one parent with the same id
    /// fail the parent.
    pub id_field: Option<String>,
    /// A field of each child that is set to its parent's id (replacing a key
    /// of that name); unset records nothing.
    pub parent_field: Option<String>,
    /// Leave `source` in the parent; by default it is removed once its
    /// children are made.
    #[serde(default)]
    pub keep_source: bool,
}
