//! Byte and depth accounting: what a document counts for against its
//! limits. A document keeps its size as it changes; these say what each
//! value, entry and child adds.

use serde_json::Value;

use super::Document;

/// What appending `value` adds to a slot that is (`listed`) or is not yet
/// an array: the value and its comma, and, the first time, the array.
pub(super) fn append_bytes(listed: bool, value: &Value) -> usize {
    let added = value_bytes(value) + 1;
    if listed {
        added
    } else {
        added + MIN_VALUE_BYTES + 1
    }
}

/// The bytes a field entry counts for: its key, its value and the entry.
pub(super) fn entry_bytes(name: &str, value_bytes: usize) -> usize {
    name.len() + ENTRY_BYTES + value_bytes
}

impl Document {
    /// How deeply the document's JSON is nested (its object alone: 1).
    pub fn depth(&self) -> usize {
        let fields = self.fields.values().map(container_depth).max().unwrap_or(0);
        let children = self
            .children
            .iter()
            .map(|c| 1 + c.depth())
            .max()
            .unwrap_or(0);
        1 + fields.max(children)
    }

    /// About how many bytes the document takes as JSON, children included;
    /// kept as the document changes, so it costs nothing to ask. Every
    /// value counts at least [`MIN_VALUE_BYTES`], near what the host holds
    /// for it, so many tiny values cannot hide much memory behind a small
    /// size.
    pub fn approx_json_bytes(&self) -> usize {
        self.bytes
    }

    /// Measure the document from scratch (what `bytes` caches).
    pub(crate) fn measure_bytes(&self) -> usize {
        let children = self.children.iter().map(|c| c.bytes + 1).sum::<usize>();
        self.bytes_without_children()
            + if self.children.is_empty() {
                0
            } else {
                CHILDREN_BYTES + children
            }
    }

    fn bytes_without_children(&self) -> usize {
        let fields: usize = self
            .fields
            .iter()
            .map(|(k, v)| entry_bytes(k, value_bytes(v)))
            .sum();
        (self.id.len() + 10).max(MIN_DOCUMENT_BYTES)
            + run_id_bytes(self.run_id.as_deref())
            + fields
            + if self.deleted { DELETED_BYTES } else { 0 }
    }
}

/// What `,"_deleted":true` adds.
const DELETED_BYTES: usize = 16;

/// What `,"_children":[]` adds.
pub(super) const CHILDREN_BYTES: usize = 15;

/// The least a document counts for, fields aside: what the host holds for
/// one, so a document of many tiny nested children is measured by memory.
pub const MIN_DOCUMENT_BYTES: usize = std::mem::size_of::<Document>();

/// The least any value counts for in a document's size: what the host holds
/// for a value (its slot), so many tiny values are measured by memory too.
pub const MIN_VALUE_BYTES: usize = std::mem::size_of::<Value>();

/// What a field or object entry counts for besides its key and value: its
/// hash, the key's header and its index (`"`, `"`, `:` and `,` as JSON).
const ENTRY_BYTES: usize = 40;

pub(super) fn run_id_bytes(run_id: Option<&str>) -> usize {
    run_id.map_or(0, |r| r.len() + 12)
}

/// How many bytes `value` counts for in a document's size: about its JSON
/// length, each value at least [`MIN_VALUE_BYTES`]. Walks without recursion.
pub fn value_bytes(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => return MIN_VALUE_BYTES,
        Value::Number(n) => return n.as_str().len().max(MIN_VALUE_BYTES),
        Value::String(s) => return (s.len() + 2).max(MIN_VALUE_BYTES),
        Value::Array(_) | Value::Object(_) => {}
    }
    let mut total = 0usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        total += match v {
            Value::Null | Value::Bool(_) => MIN_VALUE_BYTES,
            Value::Number(n) => n.as_str().len().max(MIN_VALUE_BYTES),
            Value::String(s) => (s.len() + 2).max(MIN_VALUE_BYTES),
            Value::Array(items) => {
                stack.extend(items);
                MIN_VALUE_BYTES + items.len()
            }
            Value::Object(map) => {
                stack.extend(map.values());
                MIN_VALUE_BYTES + map.keys().map(|k| entry_bytes(k, 0)).sum::<usize>()
            }
        };
    }
    total
}

fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}

/// How many objects and arrays are nested in `value`, itself included (0
/// for a scalar). Walks without recursion.
pub fn container_depth(value: &Value) -> usize {
    match value {
        Value::Array(items) if items.iter().all(is_scalar) => return 1,
        Value::Object(map) if map.values().all(is_scalar) => return 1,
        Value::Array(_) | Value::Object(_) => {}
        _ => return 0,
    }
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(depth);
                stack.extend(items.iter().map(|i| (i, depth + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(depth);
                stack.extend(map.values().map(|i| (i, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}
