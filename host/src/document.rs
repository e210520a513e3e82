//! The document: what moves from a connector through stages to an indexer.
//!
//! A [`Document`] has an id, an optional run id, named fields holding JSON
//! values, and optionally nested children. A field holding a JSON array is
//! *multi-valued*: [`Document::get`] returns its first value and
//! [`Document::get_all`] each of them. Plugins reach documents only through the
//! `document` resource of the WIT contract, which maps one to one onto the
//! methods here.

use serde_json::{Map, Value};

/// Field names a plugin cannot set, rename or remove through field methods.
pub const RESERVED_FIELDS: [&str; 3] = [ID_FIELD, RUN_ID_FIELD, CHILDREN_FIELD];
/// JSON key of the document id.
pub const ID_FIELD: &str = "id";
/// JSON key of the run id.
pub const RUN_ID_FIELD: &str = "run_id";
/// JSON key of the nested children.
pub const CHILDREN_FIELD: &str = "_children";

/// Why a document operation was refused. Mirrors `field-error` in the WIT.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldError {
    #[error("`{0}` is a reserved field name")]
    ReservedField(String),
    #[error("wrong type: {0}")]
    WrongType(String),
    #[error("invalid path: {0}")]
    InvalidPath(String),
    #[error("invalid document JSON: {0}")]
    InvalidJson(String),
    #[error("document too large: {0}")]
    TooLarge(String),
}

/// How [`Document::rename`] treats a target that already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    Overwrite,
    Append,
    Skip,
}

/// A document in flight.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    id: String,
    run_id: Option<String>,
    fields: Map<String, Value>,
    children: Vec<Document>,
    dropped: bool,
    skip_stages: bool,
}

fn check_name(name: &str) -> Result<(), FieldError> {
    if RESERVED_FIELDS.contains(&name) {
        return Err(FieldError::ReservedField(name.to_owned()));
    }
    Ok(())
}

/// The values of a field: each element of an array, else the value itself.
fn values_of(value: &Value) -> impl Iterator<Item = &Value> {
    let slice: &[Value] = match value {
        Value::Array(items) => items,
        single => std::slice::from_ref(single),
    };
    slice.iter()
}

/// Turn `slot` into an array (wrapping a single value) and append `value`.
fn append(slot: &mut Value, value: Value) {
    match slot {
        Value::Array(items) => items.push(value),
        single => {
            let first = single.take();
            *single = Value::Array(vec![first, value]);
        }
    }
}

impl Document {
    /// A new document with no fields.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    pub fn set_run_id(&mut self, run_id: Option<String>) {
        self.run_id = run_id;
    }

    /// Whether `name` is present, with any value.
    pub fn has(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }

    /// Field names in insertion order (reserved names never appear).
    pub fn field_names(&self) -> impl Iterator<Item = &str> {
        self.fields.keys().map(String::as_str)
    }

    /// All fields, for hosts and indexers that walk the whole document.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// How many values `name` holds.
    pub fn value_count(&self, name: &str) -> usize {
        self.fields.get(name).map_or(0, |v| values_of(v).count())
    }

    /// Whether `name` holds a list of values (a JSON array).
    pub fn is_multi_valued(&self, name: &str) -> bool {
        matches!(self.fields.get(name), Some(Value::Array(_)))
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        values_of(self.fields.get(name)?).next()
    }

    /// Every value of `name`.
    pub fn get_all(&self, name: &str) -> impl Iterator<Item = &Value> {
        self.fields.get(name).into_iter().flat_map(values_of)
    }

    /// The first value of `name` as text; `None` when absent or null.
    pub fn get_string(&self, name: &str) -> Option<String> {
        self.get(name).and_then(value_as_text)
    }

    /// Make `name` hold `value`.
    pub fn set(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        check_name(name)?;
        self.fields.insert(name.to_owned(), value);
        Ok(())
    }

    /// Make `name` multi-valued with exactly `values`.
    pub fn set_all(&mut self, name: &str, values: Vec<Value>) -> Result<(), FieldError> {
        self.set(name, Value::Array(values))
    }

    /// Append `value` to `name`, making it multi-valued.
    pub fn add(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        check_name(name)?;
        match self.fields.get_mut(name) {
            Some(slot) => append(slot, value),
            None => {
                self.fields
                    .insert(name.to_owned(), Value::Array(vec![value]));
            }
        }
        Ok(())
    }

    /// Set `name` when absent, else append to it.
    pub fn set_or_add(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        check_name(name)?;
        match self.fields.get_mut(name) {
            Some(slot) => append(slot, value),
            None => {
                self.fields.insert(name.to_owned(), value);
            }
        }
        Ok(())
    }

    /// Remove `name`; true when it was present.
    pub fn remove(&mut self, name: &str) -> Result<bool, FieldError> {
        check_name(name)?;
        Ok(self.fields.shift_remove(name).is_some())
    }

    /// Move `source` to `target`; false when `source` was absent.
    pub fn rename(
        &mut self,
        source: &str,
        target: &str,
        mode: UpdateMode,
    ) -> Result<bool, FieldError> {
        check_name(source)?;
        check_name(target)?;
        if source == target {
            return Ok(self.has(source));
        }
        let Some(value) = self.fields.shift_remove(source) else {
            return Ok(false);
        };
        match (self.fields.get_mut(target), mode) {
            (Some(_), UpdateMode::Skip) => {}
            (Some(slot), UpdateMode::Append) => {
                for v in values_of(&value) {
                    append(slot, v.clone());
                }
            }
            (Some(slot), UpdateMode::Overwrite) => *slot = value,
            (None, _) => {
                self.fields.insert(target.to_owned(), value);
            }
        }
        Ok(true)
    }

    /// The value at a nested `path` such as `a.b[2].c`.
    pub fn get_path(&self, path: &str) -> Result<Option<&Value>, FieldError> {
        let steps = parse_path(path)?;
        let (Step::Key(first), rest) = split_first(&steps) else {
            return Err(invalid_path(path, "it must start with a field name"));
        };
        let mut node = match self.fields.get(first) {
            Some(v) => v,
            None => return Ok(None),
        };
        for step in rest {
            let next = match (step, node) {
                (Step::Key(k), Value::Object(map)) => map.get(k),
                (Step::Index(i), Value::Array(items)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(v) => node = v,
                None => return Ok(None),
            }
        }
        Ok(Some(node))
    }

    /// Set the value at `path`, creating objects and arrays along the way.
    pub fn set_path(&mut self, path: &str, value: Value) -> Result<(), FieldError> {
        let steps = parse_path(path)?;
        let (Step::Key(first), rest) = split_first(&steps) else {
            return Err(invalid_path(path, "it must start with a field name"));
        };
        check_name(first)?;
        let mut node = self.fields.entry(first.clone()).or_insert(Value::Null);
        for step in rest {
            node = match step {
                Step::Key(k) => {
                    if node.is_null() {
                        *node = Value::Object(Map::new());
                    }
                    match node {
                        Value::Object(map) => map.entry(k.clone()).or_insert(Value::Null),
                        _ => {
                            return Err(invalid_path(
                                path,
                                &format!("`{k}` is under a non-object"),
                            ));
                        }
                    }
                }
                Step::Index(i) => {
                    if node.is_null() {
                        *node = Value::Array(Vec::new());
                    }
                    match node {
                        Value::Array(items) => {
                            if items.len() <= *i {
                                items.resize(*i + 1, Value::Null);
                            }
                            &mut items[*i]
                        }
                        _ => {
                            return Err(invalid_path(path, &format!("[{i}] is under a non-array")));
                        }
                    }
                }
            };
        }
        *node = value;
        Ok(())
    }

    /// Remove the value at `path`; true when it was present.
    pub fn remove_path(&mut self, path: &str) -> Result<bool, FieldError> {
        let steps = parse_path(path)?;
        let Some((last, parents)) = steps.split_last() else {
            return Err(invalid_path(path, "it is empty"));
        };
        if parents.is_empty() {
            let Step::Key(name) = last else {
                return Err(invalid_path(path, "it must start with a field name"));
            };
            return self.remove(name);
        }
        let (Step::Key(first), between) = split_first(parents) else {
            return Err(invalid_path(path, "it must start with a field name"));
        };
        check_name(first)?;
        let Some(mut node) = self.fields.get_mut(first) else {
            return Ok(false);
        };
        for step in between {
            let next = match (step, node) {
                (Step::Key(k), Value::Object(map)) => map.get_mut(k),
                (Step::Index(i), Value::Array(items)) => items.get_mut(*i),
                _ => None,
            };
            match next {
                Some(v) => node = v,
                None => return Ok(false),
            }
        }
        Ok(match (last, node) {
            (Step::Key(k), Value::Object(map)) => map.shift_remove(k).is_some(),
            (Step::Index(i), Value::Array(items)) if *i < items.len() => {
                items.remove(*i);
                true
            }
            _ => false,
        })
    }

    /// Nest `child` inside this document.
    pub fn add_child(&mut self, child: Document) {
        self.children.push(child);
    }

    pub fn children(&self) -> &[Document] {
        &self.children
    }

    pub fn set_dropped(&mut self, dropped: bool) {
        self.dropped = dropped;
    }

    pub fn is_dropped(&self) -> bool {
        self.dropped
    }

    pub fn set_skip_stages(&mut self, skip: bool) {
        self.skip_stages = skip;
    }

    pub fn skips_stages(&self) -> bool {
        self.skip_stages
    }

    /// About how many bytes the document takes as JSON; cheap enough to call
    /// per document (no serialization), close enough to bound batch sizes.
    pub fn approx_json_bytes(&self) -> usize {
        let fields: usize = self
            .fields
            .iter()
            .map(|(k, v)| k.len() + 4 + approx_json_len(v))
            .sum();
        let children: usize = self.children.iter().map(Document::approx_json_bytes).sum();
        self.id.len() + 10 + self.run_id.as_ref().map_or(0, |r| r.len() + 12) + fields + children
    }

    /// The whole document as JSON text, written straight from the fields
    /// (no intermediate JSON value); the same text as serializing it.
    pub fn to_json_string(&self) -> String {
        let mut out = Vec::with_capacity(self.approx_json_bytes());
        self.write_json(&mut out);
        // Only whole UTF-8 strings and ASCII were written.
        String::from_utf8(out).unwrap_or_default()
    }

    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"id\":");
        json::write_str(out, &self.id);
        if let Some(run_id) = &self.run_id {
            out.extend_from_slice(b",\"run_id\":");
            json::write_str(out, run_id);
        }
        for (k, v) in &self.fields {
            out.push(b',');
            json::write_str(out, k);
            out.push(b':');
            json::write_value(out, v);
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
        for (k, v) in &self.fields {
            out.insert(k.clone(), v.clone());
        }
        if !self.children.is_empty() {
            let children = self.children.iter().map(Document::to_json).collect();
            out.insert(CHILDREN_FIELD.to_owned(), Value::Array(children));
        }
        Value::Object(out)
    }

    /// A document from a JSON object with a string `id`.
    pub fn from_json(json: Value) -> Result<Self, FieldError> {
        let Value::Object(mut map) = json else {
            return Err(FieldError::InvalidJson(
                "a document must be a JSON object".into(),
            ));
        };
        let id = match map.shift_remove(ID_FIELD) {
            Some(Value::String(id)) => id,
            Some(other) => {
                return Err(FieldError::InvalidJson(format!(
                    "`id` must be a string, not {other}"
                )));
            }
            None => return Err(FieldError::InvalidJson("a document needs an `id`".into())),
        };
        let run_id = match map.shift_remove(RUN_ID_FIELD) {
            Some(Value::String(run_id)) => Some(run_id),
            Some(Value::Null) | None => None,
            Some(other) => {
                return Err(FieldError::InvalidJson(format!(
                    "`run_id` must be a string, not {other}"
                )));
            }
        };
        let children = match map.shift_remove(CHILDREN_FIELD) {
            Some(Value::Array(items)) => items
                .into_iter()
                .map(Document::from_json)
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(FieldError::InvalidJson(format!(
                    "`_children` must be an array, not {other}"
                )));
            }
            None => Vec::new(),
        };
        Ok(Self {
            id,
            run_id,
            fields: map,
            children,
            dropped: false,
            skip_stages: false,
        })
    }

    /// A document with `id` whose fields are those of the JSON object `text`;
    /// reserved keys in it are left out.
    pub fn from_fields_json_str(id: impl Into<String>, text: &str) -> Result<Self, FieldError> {
        let fields = match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return Err(FieldError::InvalidJson(
                    "fields must be a JSON object".into(),
                ));
            }
            Err(e) => return Err(FieldError::InvalidJson(e.to_string())),
        };
        let mut doc = Self {
            id: id.into(),
            fields,
            ..Self::default()
        };
        for reserved in RESERVED_FIELDS {
            doc.fields.shift_remove(reserved);
        }
        Ok(doc)
    }

    /// Parse whole-document JSON text, straight into a document (no
    /// intermediate JSON object).
    pub fn from_json_str(text: &str) -> Result<Self, FieldError> {
        serde_json::from_str(text).map_err(|e| FieldError::InvalidJson(e.to_string()))
    }

    /// Replace fields and children with those of `json`, whose `id` and
    /// `run_id` (when present) must match this document's.
    pub fn load_json(&mut self, json: Value) -> Result<(), FieldError> {
        let mut json = json;
        if let Value::Object(map) = &mut json {
            map.entry(ID_FIELD)
                .or_insert_with(|| Value::String(self.id.clone()));
        }
        let loaded = Self::from_json(json)?;
        if loaded.id != self.id {
            return Err(FieldError::InvalidJson(format!(
                "`id` is `{}` but the document is `{}`",
                loaded.id, self.id
            )));
        }
        if loaded.run_id.is_some() && loaded.run_id != self.run_id {
            return Err(FieldError::InvalidJson("`run_id` cannot be changed".into()));
        }
        self.fields = loaded.fields;
        self.children = loaded.children;
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
            map.serialize_entry(k, v)?;
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
        deserializer.deserialize_map(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> serde::de::Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a document: a JSON object with a string `id`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        use serde::de::Error;
        let mut fields = Map::new();
        // The last of each reserved key counts, as in a parsed JSON object.
        let (mut id, mut run_id, mut children) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            let value: Value = map.next_value()?;
            match key.as_str() {
                ID_FIELD => id = Some(value),
                RUN_ID_FIELD => run_id = Some(value),
                CHILDREN_FIELD => children = Some(value),
                _ => {
                    fields.insert(key, value);
                }
            }
        }
        let mut doc = Document {
            fields,
            ..Document::default()
        };
        doc.id = match id {
            Some(Value::String(id)) => id,
            Some(other) => {
                return Err(A::Error::custom(format!(
                    "`id` must be a string, not {other}"
                )));
            }
            None => return Err(A::Error::custom("a document needs an `id`")),
        };
        doc.run_id = match run_id {
            Some(Value::String(run_id)) => Some(run_id),
            Some(Value::Null) | None => None,
            Some(other) => {
                return Err(A::Error::custom(format!(
                    "`run_id` must be a string, not {other}"
                )));
            }
        };
        doc.children = match children {
            Some(Value::Array(items)) => items
                .into_iter()
                .map(Document::from_json)
                .collect::<Result<_, _>>()
                .map_err(A::Error::custom)?,
            Some(other) => {
                return Err(A::Error::custom(format!(
                    "`_children` must be an array, not {other}"
                )));
            }
            None => Vec::new(),
        };
        Ok(doc)
    }
}

/// Compact JSON writing, as `serde_json` writes it, with strings escaped
/// eight bytes at a time (documents are mostly long runs of plain text).
mod json {
    use serde_json::Value;

    pub(super) fn write_value(out: &mut Vec<u8>, value: &Value) {
        match value {
            Value::String(s) => write_str(out, s),
            Value::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_value(out, item);
                }
                out.push(b']');
            }
            Value::Object(map) => {
                out.push(b'{');
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, k);
                    out.push(b':');
                    write_value(out, v);
                }
                out.push(b'}');
            }
            // Scalars: writing to a Vec cannot fail.
            scalar => {
                let _ = serde_json::to_writer(&mut *out, scalar);
            }
        }
    }

    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;

    /// Whether any of the eight bytes of `x` is a control character, `"` or `\`.
    fn needs_escape(x: u64) -> bool {
        let has_zero = |y: u64| y.wrapping_sub(LOW) & !y & HIGH;
        let control = x.wrapping_sub(LOW * 0x20) & !x & HIGH;
        (control | has_zero(x ^ (LOW * u64::from(b'"'))) | has_zero(x ^ (LOW * u64::from(b'\\'))))
            != 0
    }

    pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let bytes = s.as_bytes();
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        let (mut i, mut run) = (0, 0);
        while i < bytes.len() {
            if let Some(chunk) = bytes.get(i..i + 8)
                && let Ok(chunk) = <[u8; 8]>::try_from(chunk)
                && !needs_escape(u64::from_le_bytes(chunk))
            {
                i += 8;
                continue;
            }
            let byte = bytes[i];
            let escape: Option<&[u8]> = match byte {
                b'"' => Some(b"\\\""),
                b'\\' => Some(b"\\\\"),
                b'\n' => Some(b"\\n"),
                b'\r' => Some(b"\\r"),
                b'\t' => Some(b"\\t"),
                0x08 => Some(b"\\b"),
                0x0c => Some(b"\\f"),
                0..0x20 => None,
                _ => {
                    i += 1;
                    continue;
                }
            };
            out.extend_from_slice(&bytes[run..i]);
            match escape {
                Some(escape) => out.extend_from_slice(escape),
                None => out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xf)],
                ]),
            }
            i += 1;
            run = i;
        }
        out.extend_from_slice(&bytes[run..]);
        out.push(b'"');
    }
}

/// About how many bytes `value` takes as JSON, without serializing it.
fn approx_json_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 12,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| approx_json_len(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + approx_json_len(v))
                .sum::<usize>()
        }
    }
}

/// A value as text: strings as they are, scalars rendered, JSON as JSON text.
pub fn value_as_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

fn split_first(steps: &[Step]) -> (&Step, &[Step]) {
    // parse_path never returns an empty list.
    (&steps[0], &steps[1..])
}

fn invalid_path(path: &str, why: &str) -> FieldError {
    FieldError::InvalidPath(format!("`{path}`: {why}"))
}

/// Parse `a.b[2].c` into steps. Keys are any characters but `.`, `[` and `]`.
fn parse_path(path: &str) -> Result<Vec<Step>, FieldError> {
    let mut steps = Vec::new();
    let mut rest = path;
    let mut expect_key = true;
    while !rest.is_empty() || expect_key {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after
                .find(']')
                .ok_or_else(|| invalid_path(path, "`[` without `]`"))?;
            let index = after[..end]
                .parse()
                .map_err(|_| invalid_path(path, "an index must be a non-negative integer"))?;
            steps.push(Step::Index(index));
            rest = &after[end + 1..];
            expect_key = false;
        } else if expect_key {
            let end = rest.find(['.', '[', ']']).unwrap_or(rest.len());
            if end == 0 {
                return Err(invalid_path(path, "a field name is empty"));
            }
            steps.push(Step::Key(rest[..end].to_owned()));
            rest = &rest[end..];
            expect_key = false;
        } else if let Some(after) = rest.strip_prefix('.') {
            rest = after;
            expect_key = true;
        } else {
            return Err(invalid_path(path, "expected `.` or `[` between steps"));
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Document {
        Document::from_json(json!({"id": "d1", "run_id": "r", "title": "Hi", "tags": ["a", "b"]}))
            .expect("valid document")
    }

    #[test]
    fn single_and_multi_valued_fields() {
        let mut d = doc();
        assert_eq!(d.get("title"), Some(&json!("Hi")));
        assert_eq!(d.value_count("tags"), 2);
        assert_eq!(d.get("tags"), Some(&json!("a")));
        d.add("title", json!("There")).expect("add");
        assert_eq!(
            d.get_all("title").collect::<Vec<_>>(),
            [&json!("Hi"), &json!("There")]
        );
        d.set_or_add("new", json!(5)).expect("set_or_add");
        assert_eq!(d.get("new"), Some(&json!(5)));
        assert_eq!(d.value_count("new"), 1);
        d.add("fresh", json!(true)).expect("add");
        assert_eq!(d.value_count("fresh"), 1);
        assert!(d.fields()["fresh"].is_array());
        assert_eq!(d.get_string("new").as_deref(), Some("5"));
        assert_eq!(d.value_count("absent"), 0);
    }

    #[test]
    fn reserved_names_are_refused() {
        let mut d = doc();
        for name in RESERVED_FIELDS {
            assert_eq!(
                d.set(name, json!(1)),
                Err(FieldError::ReservedField(name.into()))
            );
            assert!(d.remove(name).is_err());
            assert!(d.rename("title", name, UpdateMode::Overwrite).is_err());
        }
        assert_eq!(d.id(), "d1");
    }

    #[test]
    fn rename_modes() {
        let mut d = doc();
        d.set("x", json!("x1")).expect("set");
        assert!(d.rename("title", "x", UpdateMode::Skip).expect("rename"));
        assert_eq!(d.get_all("x").count(), 1);
        assert!(!d.has("title"));
        d.set("y", json!("y1")).expect("set");
        assert!(d.rename("tags", "y", UpdateMode::Append).expect("rename"));
        assert_eq!(d.fields()["y"], json!(["y1", "a", "b"]));
        assert!(
            !d.rename("missing", "z", UpdateMode::Overwrite)
                .expect("rename")
        );
    }

    #[test]
    fn nested_paths() {
        let mut d = doc();
        d.set_path("a.b[2].c", json!(7)).expect("set_path");
        assert_eq!(d.fields()["a"], json!({"b": [null, null, {"c": 7}]}));
        assert_eq!(d.get_path("a.b[2].c").expect("get_path"), Some(&json!(7)));
        assert_eq!(d.get_path("a.b[9].c").expect("get_path"), None);
        assert_eq!(d.get_path("tags[1]").expect("get_path"), Some(&json!("b")));
        assert!(d.set_path("title.x", json!(1)).is_err());
        assert!(d.remove_path("a.b[2].c").expect("remove_path"));
        assert_eq!(d.fields()["a"], json!({"b": [null, null, {}]}));
        assert!(d.remove_path("a").expect("remove_path"));
        for bad in ["", ".a", "a..b", "a[", "a[x]", "a]b", "[0]"] {
            assert!(
                d.get_path(bad).is_err() || bad == "[0]",
                "path {bad:?} should be refused"
            );
        }
        assert!(d.set_path("[0]", json!(1)).is_err());
        assert!(d.set_path("id.x", json!(1)).is_err());
    }

    #[test]
    fn json_round_trip_with_children() {
        let mut d = doc();
        let mut child = Document::new("c1");
        child.set("n", json!(1)).expect("set");
        d.add_child(child);
        let text = d.to_json().to_string();
        assert_eq!(d.to_json_string(), text, "direct serialization matches");
        let back = Document::from_json_str(&text).expect("parse");
        assert_eq!(back, d);
        assert_eq!(back.children()[0].get("n"), Some(&json!(1)));
    }

    #[test]
    fn written_json_is_what_serde_json_writes() {
        let every_byte: String = (0u8..128).map(char::from).collect();
        let texts = [
            String::new(),
            "plain text that is longer than eight bytes".into(),
            every_byte.clone(),
            format!("{every_byte}{every_byte}x"),
            "é\u{2028}€😀\"\\/\u{7f}".repeat(5),
            "12345678\"".into(),
            "1234567\n".into(),
        ];
        for text in &texts {
            let mut d = Document::new(text.as_str());
            d.set(text, json!([text, 1, -2.5, 1e300, null, true, {"k": text}]))
                .expect("set");
            d.set_run_id(Some(text.clone()));
            assert_eq!(d.to_json_string(), d.to_json().to_string(), "{text:?}");
        }
    }

    #[test]
    fn parsing_text_checks_what_parsing_a_value_checks() {
        let same = [
            r#"{"id":"a","run_id":null,"x":[1,2],"_children":[{"id":"b","y":{"z":1}}]}"#,
            r#"{"x":1,"id":"a","run_id":"r","x":2}"#,
            r#"{"id":1,"id":"a","run_id":1,"run_id":"r","_children":{},"_children":[]}"#,
        ];
        for text in same {
            let value: Value = serde_json::from_str(text).expect("json");
            assert_eq!(
                Document::from_json_str(text).expect("text"),
                Document::from_json(value).expect("value"),
                "{text}"
            );
        }
        for (text, error) in [
            (r#"{"x":1}"#, "a document needs an `id`"),
            (r#"{"id":7}"#, "`id` must be a string, not 7"),
            (
                r#"{"id":"a","run_id":1}"#,
                "`run_id` must be a string, not 1",
            ),
            (
                r#"{"id":"a","_children":{}}"#,
                "`_children` must be an array",
            ),
            (
                r#"{"id":"a","_children":[{"x":1}]}"#,
                "a document needs an `id`",
            ),
            (r#"["id"]"#, "a JSON object with a string `id`"),
            (r#"{"id":"a""#, "EOF"),
        ] {
            let e = Document::from_json_str(text).expect_err(text).to_string();
            assert!(e.contains(error), "{text}: {e}");
        }
    }

    #[test]
    fn approximate_size_is_close_to_the_serialized_size() {
        let mut d = doc();
        d.set("body", json!("x".repeat(900))).expect("set");
        d.set("nested", json!({"a": [1, 2.5, null, true], "b": "text"}))
            .expect("set");
        let real = d.to_json().to_string().len();
        let approx = d.approx_json_bytes();
        assert!(
            approx * 10 >= real * 9 && approx * 10 <= real * 12,
            "{approx} vs {real}"
        );
    }

    #[test]
    fn from_fields_json_leaves_reserved_keys_out() {
        let d = Document::from_fields_json_str("x", r#"{"id": "y", "run_id": "r", "a": 1}"#)
            .expect("valid");
        assert_eq!(d.id(), "x");
        assert_eq!(d.run_id(), None);
        assert_eq!(d.field_names().collect::<Vec<_>>(), ["a"]);
        assert!(Document::from_fields_json_str("x", "[1]").is_err());
    }

    #[test]
    fn load_json_keeps_identity() {
        let mut d = doc();
        d.load_json(json!({"only": 1})).expect("load");
        assert_eq!(d.field_names().collect::<Vec<_>>(), ["only"]);
        assert_eq!(d.run_id(), Some("r"));
        assert!(d.load_json(json!({"id": "other"})).is_err());
        assert!(Document::from_json(json!({"no_id": 1})).is_err());
        assert!(Document::from_json(json!([1])).is_err());
    }
}
