//! Documents to and from JSON: whole-document JSON text and values, the
//! shaped text an indexer asks for, and the serde impls.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::parse::{deserialize_document, parse_document_within, parse_fields_within};
use super::{
    CHILDREN_FIELD, DELETED_FIELD, DocLimits, Document, FieldError, FieldName, Fields, ID_FIELD,
    RUN_ID_FIELD, writer,
};

impl Document {
    /// The whole document as JSON text, written straight from the fields
    /// (no intermediate JSON value); the same text as serializing it.
    pub fn to_json_string(&self) -> String {
        let mut out = Vec::with_capacity(self.approx_json_bytes());
        self.write_json(&mut out);
        // Only whole UTF-8 strings and ASCII were written.
        String::from_utf8(out).unwrap_or_default()
    }

    /// The document as JSON text shaped for an indexer: with `include`,
    /// only `id`, `run_id` and the fields named (in that order; `_children`
    /// for nested children); without it, everything. Names in `exclude`
    /// are left out, reserved names included. Each name is looked up once,
    /// whatever the number of names in `exclude`.
    pub fn to_json_string_shaped(
        &self,
        include: Option<&[String]>,
        exclude: &HashSet<String>,
    ) -> String {
        let mut out = Vec::with_capacity(self.approx_json_bytes());
        self.write_json_shaped(&mut out, include, exclude);
        // Only whole UTF-8 strings and ASCII were written.
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`Document::to_json_string_shaped`], appended to `out`.
    pub fn write_json_shaped(
        &self,
        out: &mut Vec<u8>,
        include: Option<&[String]>,
        exclude: &HashSet<String>,
    ) {
        let Some(include) = include else {
            if exclude.is_empty() {
                return self.write_json(out);
            }
            let names: Vec<&str> = self.fields.keys().map(FieldName::as_str).collect();
            return self.shaped(out, names.into_iter().chain([CHILDREN_FIELD]), exclude);
        };
        self.shaped(out, include.iter().map(String::as_str), exclude)
    }

    fn shaped<'a>(
        &self,
        out: &mut Vec<u8>,
        names: impl Iterator<Item = &'a str>,
        exclude: &HashSet<String>,
    ) {
        let kept = |name: &str| !exclude.contains(name);
        let mut first = true;
        let mut key = |out: &mut Vec<u8>, name: &str| {
            out.push(if std::mem::take(&mut first) {
                b'{'
            } else {
                b','
            });
            writer::write_str(out, name);
            out.push(b':');
        };
        if kept(ID_FIELD) {
            key(out, ID_FIELD);
            writer::write_str(out, &self.id);
        }
        if let Some(run_id) = self.run_id.as_deref().filter(|_| kept(RUN_ID_FIELD)) {
            key(out, RUN_ID_FIELD);
            writer::write_str(out, run_id);
        }
        if self.deleted && kept(DELETED_FIELD) {
            key(out, DELETED_FIELD);
            out.extend_from_slice(b"true");
        }
        for name in names.filter(|n| kept(n)) {
            if name == CHILDREN_FIELD {
                if !self.children.is_empty() {
                    key(out, CHILDREN_FIELD);
                    out.push(b'[');
                    for (i, child) in self.children.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        child.write_json(out);
                    }
                    out.push(b']');
                }
            } else if let Some(value) = self.fields.get(name) {
                key(out, name);
                writer::write_value(out, value);
            }
        }
        if first {
            out.push(b'{');
        }
        out.push(b'}');
    }

    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"id\":");
        writer::write_str(out, &self.id);
        if let Some(run_id) = &self.run_id {
            out.extend_from_slice(b",\"run_id\":");
            writer::write_str(out, run_id);
        }
        if self.deleted {
            out.extend_from_slice(b",\"_deleted\":true");
        }
        for (k, v) in &self.fields {
            out.push(b',');
            writer::write_str(out, k);
            out.push(b':');
            writer::write_value(out, v);
        }
        if !self.children.is_empty() {
            out.extend_from_slice(b",\"_children\":[");
            for (i, child) in self.children.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                child.write_json(out);
            }
            out.push(b']');
        }
        out.push(b'}');
    }

    /// The whole document as a JSON object.
    pub fn to_json(&self) -> Value {
        let mut out = Map::with_capacity(self.fields.len() + 2);
        out.insert(ID_FIELD.to_owned(), Value::String(self.id.clone()));
        if let Some(run_id) = &self.run_id {
            out.insert(RUN_ID_FIELD.to_owned(), Value::String(run_id.clone()));
        }
        if self.deleted {
            out.insert(DELETED_FIELD.to_owned(), Value::Bool(true));
        }
        for (k, v) in &self.fields {
            out.insert(k.as_str().to_owned(), v.clone());
        }
        if !self.children.is_empty() {
            let children = self.children.iter().map(Document::to_json).collect();
            out.insert(CHILDREN_FIELD.to_owned(), Value::Array(children));
        }
        Value::Object(out)
    }

    /// The fields alone as a JSON object, in order (no `id`, `run_id` or
    /// `_children`).
    pub fn fields_json(&self) -> Value {
        let fields = self.fields.iter();
        Value::Object(
            fields
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .collect(),
        )
    }

    /// A document from a JSON object with a string `id`, under the default
    /// limits.
    pub fn from_json(json: Value) -> Result<Self, FieldError> {
        Self::from_json_value(json)?.admitted(DocLimits::default())
    }

    /// The document of `json`, not yet measured or checked.
    fn from_json_value(json: Value) -> Result<Self, FieldError> {
        let Value::Object(mut map) = json else {
            return Err(FieldError::InvalidJson(
                "a document must be a JSON object".into(),
            ));
        };
        let id = map.shift_remove(ID_FIELD);
        let run_id = map.shift_remove(RUN_ID_FIELD);
        let children = map.shift_remove(CHILDREN_FIELD);
        let deleted = map.shift_remove(DELETED_FIELD);
        let fields = map.into_iter().map(|(k, v)| (k.into(), v)).collect();
        Ok(Self::from_parts(fields, id, run_id, children, deleted)?)
    }

    /// A document of `fields` and the values of its reserved keys, which
    /// must be a string `id`, a string or null `run_id`, an array of child
    /// documents and a boolean `_deleted`; not yet measured or checked.
    pub(super) fn from_parts(
        fields: Fields,
        id: Option<Value>,
        run_id: Option<Value>,
        children: Option<Value>,
        deleted: Option<Value>,
    ) -> Result<Self, BadShape> {
        let deleted = match deleted {
            Some(Value::Bool(deleted)) => deleted,
            Some(Value::Null) | None => false,
            Some(other) => {
                return Err(BadShape::Own(format!(
                    "`_deleted` must be true or false, not {other}"
                )));
            }
        };
        let id = match id {
            Some(Value::String(id)) => id,
            Some(other) => {
                return Err(BadShape::Own(format!("`id` must be a string, not {other}")));
            }
            None => return Err(BadShape::Own("a document needs an `id`".into())),
        };
        let run_id = match run_id {
            Some(Value::String(run_id)) => Some(run_id),
            Some(Value::Null) | None => None,
            Some(other) => {
                return Err(BadShape::Own(format!(
                    "`run_id` must be a string, not {other}"
                )));
            }
        };
        let children = match children {
            Some(Value::Array(items)) => items
                .into_iter()
                .map(Document::nested_from_json)
                .collect::<Result<_, _>>()
                .map_err(BadShape::Child)?,
            Some(other) => {
                return Err(BadShape::Own(format!(
                    "`_children` must be an array, not {other}"
                )));
            }
            None => Vec::new(),
        };
        Ok(Self {
            id,
            run_id,
            fields,
            children,
            deleted,
            ..Self::default()
        })
    }

    /// A nested child: measured (its parent's size is the sum of its
    /// children's), checked with its parent.
    fn nested_from_json(json: Value) -> Result<Self, FieldError> {
        let mut child = Self::from_json_value(json)?;
        child.bytes = child.measure_bytes();
        Ok(child)
    }

    /// A document with `id` whose fields are those of the JSON object `text`;
    /// reserved keys in it are left out. Checked against `limits`.
    pub fn from_fields_json_str(
        id: impl Into<String>,
        text: &str,
        limits: DocLimits,
    ) -> Result<Self, FieldError> {
        let Some(fields) = parse_fields_within(text, limits.max_bytes)? else {
            return Err(FieldError::InvalidJson(
                "fields must be a JSON object".into(),
            ));
        };
        Self {
            id: id.into(),
            fields,
            ..Self::default()
        }
        .admitted(limits)
    }

    /// Parse whole-document JSON text, straight into a document (no
    /// intermediate JSON object), as the host reads documents it wrote:
    /// any size, at most [`DocLimits::MAX_DEPTH`] deep.
    pub fn from_json_str(text: &str) -> Result<Self, FieldError> {
        Self::from_json_str_within(text, DocLimits::HOST)
    }

    /// Parse whole-document JSON text, checked against `limits`; nothing
    /// larger than they allow is built on the way.
    pub fn from_json_str_within(text: &str, limits: DocLimits) -> Result<Self, FieldError> {
        // Measured and checked against `limits` by the parse.
        parse_document_within(text, limits)
    }

    /// Replace fields and children with those of `json`, whose `id` and
    /// `run_id` (when present) must match this document's; checked against
    /// this document's limits.
    pub fn load_json(&mut self, json: Value) -> Result<(), FieldError> {
        let mut json = json;
        if let Value::Object(map) = &mut json {
            map.entry(ID_FIELD)
                .or_insert_with(|| Value::String(self.id.clone()));
        }
        let mut loaded = Self::from_json_value(json)?;
        if loaded.id != self.id {
            return Err(FieldError::InvalidJson(format!(
                "`id` is `{}` but the document is `{}`",
                loaded.id, self.id
            )));
        }
        if loaded.run_id.is_some() && loaded.run_id != self.run_id {
            return Err(FieldError::InvalidJson("`run_id` cannot be changed".into()));
        }
        if loaded.deleted != self.deleted {
            return Err(FieldError::InvalidJson(
                "`_deleted` cannot be changed (only a connector makes deletion markers)".into(),
            ));
        }
        // Only the host says which run a document belongs to.
        loaded.clear_run_ids();
        loaded.run_id.clone_from(&self.run_id);
        let loaded = loaded.admitted(self.limits)?;
        self.fields = loaded.fields;
        self.children = loaded.children;
        self.bytes = loaded.bytes;
        Ok(())
    }
}

/// Serializes as the whole-document JSON object of [`Document::to_json`].
impl serde::Serialize for Document {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let extra = 1 + usize::from(self.run_id.is_some()) + usize::from(!self.children.is_empty());
        let mut map = serializer.serialize_map(Some(self.fields.len() + extra))?;
        map.serialize_entry(ID_FIELD, &self.id)?;
        if let Some(run_id) = &self.run_id {
            map.serialize_entry(RUN_ID_FIELD, run_id)?;
        }
        for (k, v) in &self.fields {
            map.serialize_entry(k.as_str(), v)?;
        }
        if !self.children.is_empty() {
            map.serialize_entry(CHILDREN_FIELD, &self.children)?;
        }
        map.end()
    }
}

/// Reads the whole-document JSON object of [`Document::to_json`], with the
/// checks of [`Document::from_json`].
impl<'de> serde::Deserialize<'de> for Document {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_document(deserializer, DocLimits::HOST)
    }
}

/// Why the reserved keys of a document's JSON are refused: the message is
/// the document's own, or a child's whole error.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadShape {
    /// This document's `id`, `run_id` or `_children` has the wrong shape.
    #[error("{0}")]
    Own(String),
    /// A nested child is refused.
    #[error("{0}")]
    Child(FieldError),
}

impl From<BadShape> for FieldError {
    fn from(bad: BadShape) -> Self {
        match bad {
            BadShape::Own(message) => FieldError::InvalidJson(message),
            BadShape::Child(error) => error,
        }
    }
}
