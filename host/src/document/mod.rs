//! The document: what moves from a connector through stages to an indexer.
//!
//! A [`Document`] has an id, an optional run id, named fields holding JSON
//! values, and optionally nested children. A field holding a JSON array is
//! *multi-valued*: [`Document::get`] returns its first value and
//! [`Document::get_all`] each of them. Plugins reach documents only through the
//! `document` resource of the WIT contract, which maps one to one onto the
//! methods here.

use serde_json::{Map, Value};

mod number;
pub use number::{same_json, same_number};

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

/// How large and how deep a document may grow.
///
/// A document carries the limits it is built under, and every method that
/// adds to it checks them *before* anything is allocated: no document, and
/// so no JSON walk over one (writing, measuring, dropping), is ever larger
/// or deeper than they allow, whatever a plugin asks for. The host sets a
/// plugin's limits on each document it creates or lends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocLimits {
    /// Most bytes, as [`Document::approx_json_bytes`] measures them.
    pub max_bytes: usize,
    /// Deepest nesting of the document's JSON: the document object is level
    /// 1, each object or array inside it one more, a nested child two more.
    /// Capped at [`DocLimits::MAX_DEPTH`].
    pub max_depth: usize,
}

impl DocLimits {
    /// The deepest any document may be, whatever its limits say: well under
    /// what JSON readers accept (serde_json stops at 128 levels), so every
    /// document that is written can be read back.
    pub const MAX_DEPTH: usize = 100;

    /// For documents the host reads itself (messages between processes):
    /// up to 4 GiB, [`DocLimits::MAX_DEPTH`] deep.
    pub const HOST: Self = Self {
        max_bytes: 4 << 30,
        max_depth: Self::MAX_DEPTH,
    };

    fn depth(&self) -> usize {
        self.max_depth.min(Self::MAX_DEPTH)
    }
}

impl Default for DocLimits {
    /// 16 MiB, 64 levels: the plugin defaults.
    fn default() -> Self {
        Self {
            max_bytes: 16 << 20,
            max_depth: 64,
        }
    }
}

/// A document in flight.
#[derive(Debug, Clone)]
pub struct Document {
    id: String,
    run_id: Option<String>,
    fields: Map<String, Value>,
    children: Vec<Document>,
    dropped: bool,
    skip_stages: bool,
    /// [`Document::approx_json_bytes`], kept up to date by every change.
    bytes: usize,
    limits: DocLimits,
}

/// An empty document with an empty id, measured.
impl Default for Document {
    fn default() -> Self {
        Self {
            id: String::new(),
            run_id: None,
            fields: Map::new(),
            children: Vec::new(),
            dropped: false,
            skip_stages: false,
            bytes: MIN_DOCUMENT_BYTES,
            limits: DocLimits::default(),
        }
    }
}

/// Documents are equal when their content is; the limits they were built
/// under do not count.
impl PartialEq for Document {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.run_id == other.run_id
            && self.fields == other.fields
            && self.children == other.children
            && self.dropped == other.dropped
            && self.skip_stages == other.skip_stages
    }
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

/// What appending `value` adds to a slot that is (`listed`) or is not yet
/// an array: the value and its comma, and, the first time, the array.
fn append_bytes(listed: bool, value: &Value) -> usize {
    let added = value_bytes(value) + 1;
    if listed {
        added
    } else {
        added + MIN_VALUE_BYTES + 1
    }
}

/// The bytes a field entry counts for: its key, its value and the entry.
fn entry_bytes(name: &str, value_bytes: usize) -> usize {
    name.len() + ENTRY_BYTES + value_bytes
}

impl Document {
    /// A new document with no fields, under the default limits.
    pub fn new(id: impl Into<String>) -> Self {
        let mut doc = Self {
            id: id.into(),
            ..Self::default()
        };
        doc.bytes = doc.measure_bytes();
        doc
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    pub fn set_run_id(&mut self, run_id: Option<String>) {
        self.bytes -= run_id_bytes(self.run_id.as_deref());
        self.bytes += run_id_bytes(run_id.as_deref());
        self.run_id = run_id;
    }

    /// Forget the run id of this document and of every nested child: only
    /// the host says which run a document belongs to.
    pub fn clear_run_ids(&mut self) {
        self.set_run_id(None);
        for child in &mut self.children {
            let before = child.bytes;
            child.clear_run_ids();
            self.bytes -= before - child.bytes;
        }
    }

    /// The limits this document is built under.
    pub fn limits(&self) -> DocLimits {
        self.limits
    }

    /// Build further under `limits` (what is already there stays).
    pub fn set_limits(&mut self, limits: DocLimits) {
        self.limits = limits;
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

    /// Refuse growing from `self.bytes` to `after` past the byte limit.
    fn admit_bytes(&self, after: usize) -> Result<(), FieldError> {
        admit_bytes(&self.id, self.limits, self.bytes, after)
    }

    /// Refuse a value that would sit `depth` levels deep.
    fn admit_depth(&self, depth: usize) -> Result<(), FieldError> {
        let max = self.limits.depth();
        if depth > max {
            return Err(FieldError::TooLarge(format!(
                "document `{}` would be nested {depth} levels deep, over the limit of {max} (limits.max_depth)",
                self.id
            )));
        }
        Ok(())
    }

    /// Make `name` hold `value`.
    pub fn set(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        check_name(name)?;
        self.admit_depth(1 + container_depth(&value))?;
        let added = value_bytes(&value);
        let (bytes, limits) = (self.bytes, self.limits);
        match self.fields.get_mut(name) {
            Some(slot) => {
                let after = bytes - value_bytes(slot) + added;
                admit_bytes(&self.id, limits, bytes, after)?;
                *slot = value;
                self.bytes = after;
            }
            None => {
                let after = bytes + entry_bytes(name, added);
                admit_bytes(&self.id, limits, bytes, after)?;
                self.fields.insert(name.to_owned(), value);
                self.bytes = after;
            }
        }
        Ok(())
    }

    /// Make `name` multi-valued with exactly `values`.
    pub fn set_all(&mut self, name: &str, values: Vec<Value>) -> Result<(), FieldError> {
        self.set(name, Value::Array(values))
    }

    /// Append `value` to `name`, making it multi-valued.
    pub fn add(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        self.append_to(name, value, true)
    }

    /// Set `name` when absent, else append to it.
    pub fn set_or_add(&mut self, name: &str, value: Value) -> Result<(), FieldError> {
        self.append_to(name, value, false)
    }

    /// Append `value` to `name`; when `name` is absent it becomes `[value]`
    /// (`as_list`) or `value`.
    fn append_to(&mut self, name: &str, value: Value, as_list: bool) -> Result<(), FieldError> {
        check_name(name)?;
        let listed = as_list || self.fields.contains_key(name);
        self.admit_depth(1 + usize::from(listed) + container_depth(&value))?;
        if let Some(single) = self.fields.get(name).filter(|v| !v.is_array()) {
            // It is about to be wrapped in an array: one level deeper.
            self.admit_depth(2 + container_depth(single))?;
        }
        let after = match self.fields.get(name) {
            Some(slot) => self.bytes + append_bytes(slot.is_array(), &value),
            None if as_list => {
                self.bytes + entry_bytes(name, MIN_VALUE_BYTES + 1 + value_bytes(&value))
            }
            None => self.bytes + entry_bytes(name, value_bytes(&value)),
        };
        self.admit_bytes(after)?;
        match self.fields.get_mut(name) {
            Some(slot) => append(slot, value),
            None => {
                let value = if as_list {
                    Value::Array(vec![value])
                } else {
                    value
                };
                self.fields.insert(name.to_owned(), value);
            }
        }
        self.bytes = after;
        Ok(())
    }

    /// Remove `name`; true when it was present.
    pub fn remove(&mut self, name: &str) -> Result<bool, FieldError> {
        check_name(name)?;
        Ok(match self.fields.shift_remove(name) {
            Some(old) => {
                self.bytes -= entry_bytes(name, value_bytes(&old));
                true
            }
            None => false,
        })
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
        let Some(value) = self.fields.get(source) else {
            return Ok(false);
        };
        let moved = value_bytes(value);
        let mut after = self.bytes - entry_bytes(source, moved);
        match (self.fields.get(target), mode) {
            (Some(_), UpdateMode::Skip) => {}
            (Some(slot), UpdateMode::Append) => {
                let mut listed = slot.is_array();
                if !listed {
                    // It is about to be wrapped in an array: one level deeper.
                    self.admit_depth(2 + container_depth(slot))?;
                }
                for v in values_of(value) {
                    self.admit_depth(2 + container_depth(v))?;
                    after += append_bytes(listed, v);
                    listed = true;
                }
            }
            (Some(old), UpdateMode::Overwrite) => after = after - value_bytes(old) + moved,
            (None, _) => after += entry_bytes(target, moved),
        }
        self.admit_bytes(after)?;
        let value = self.fields.shift_remove(source).unwrap_or_default();
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
        self.bytes = after;
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
    /// What it would add (new containers, the nulls padding an array up to
    /// an index, the value) is checked against the limits first: a huge
    /// index or a deep path is refused before anything is allocated.
    pub fn set_path(&mut self, path: &str, value: Value) -> Result<(), FieldError> {
        let steps = parse_path(path)?;
        let (Step::Key(first), rest) = split_first(&steps) else {
            return Err(invalid_path(path, "it must start with a field name"));
        };
        check_name(first)?;
        // The value sits in the document and in one container per later step.
        self.admit_depth((1 + rest.len()).saturating_add(container_depth(&value)))?;
        let after = self.bytes_after_set_path(path, first, rest, &value)?;
        self.admit_bytes(after)?;
        let mut node = self.fields.entry(first.clone()).or_insert(Value::Null);
        for step in rest {
            node = match step {
                Step::Key(k) => {
                    if node.is_null() {
                        *node = Value::Object(Map::new());
                    }
                    match node {
                        Value::Object(map) => map.entry(k.clone()).or_insert(Value::Null),
                        // Ruled out by `bytes_after_set_path`.
                        _ => return Err(invalid_path(path, "changed while it was walked")),
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
                        _ => return Err(invalid_path(path, "changed while it was walked")),
                    }
                }
            };
        }
        *node = value;
        self.bytes = after;
        Ok(())
    }

    /// The document's size once `value` is set at `first` + `rest`, or why
    /// the path cannot be walked. Reads only.
    fn bytes_after_set_path(
        &self,
        path: &str,
        first: &str,
        rest: &[Step],
        value: &Value,
    ) -> Result<usize, FieldError> {
        // `node`: what is at the current position (None: a new slot).
        let mut node = self.fields.get(first);
        let (mut added, mut removed) = (0usize, 0usize);
        if node.is_none() {
            added = entry_bytes(first, 0);
        }
        for step in rest {
            // A null (or a new slot) becomes the container the step needs.
            let opened = matches!(node, None | Some(Value::Null));
            if let Some(Value::Null) = node {
                removed += MIN_VALUE_BYTES;
            }
            node = match (step, node) {
                (Step::Key(k), Some(Value::Object(map))) => match map.get(k) {
                    Some(next) => Some(next),
                    None => {
                        added = added.saturating_add(entry_bytes(k, 0));
                        None
                    }
                },
                (Step::Key(k), _) if opened => {
                    added = added.saturating_add(MIN_VALUE_BYTES + entry_bytes(k, 0));
                    None
                }
                (Step::Key(k), _) => {
                    return Err(invalid_path(path, &format!("`{k}` is under a non-object")));
                }
                (Step::Index(i), Some(Value::Array(items))) if *i < items.len() => Some(&items[*i]),
                (Step::Index(i), Some(Value::Array(items))) => {
                    // Padding nulls, then the new slot (each with its comma).
                    added = added
                        .saturating_add((i - items.len()).saturating_mul(MIN_VALUE_BYTES + 1))
                        .saturating_add(1);
                    None
                }
                (Step::Index(i), _) if opened => {
                    added = added
                        .saturating_add(MIN_VALUE_BYTES)
                        .saturating_add(i.saturating_mul(MIN_VALUE_BYTES + 1))
                        .saturating_add(1);
                    None
                }
                (Step::Index(i), _) => {
                    return Err(invalid_path(path, &format!("[{i}] is under a non-array")));
                }
            };
        }
        if let Some(old) = node {
            removed += value_bytes(old);
        }
        // A sum that does not fit (a huge index) is over any limit.
        Ok(self
            .bytes
            .checked_add(added)
            .and_then(|b| b.checked_add(value_bytes(value)))
            .filter(|_| added != usize::MAX)
            .map_or(usize::MAX, |b| b - removed))
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
        let removed = match (last, node) {
            (Step::Key(k), Value::Object(map)) => map
                .shift_remove(k)
                .map(|old| entry_bytes(k, value_bytes(&old))),
            (Step::Index(i), Value::Array(items)) if *i < items.len() => {
                Some(value_bytes(&items.remove(*i)) + 1)
            }
            _ => None,
        };
        if let Some(removed) = removed {
            self.bytes -= removed;
        }
        Ok(removed.is_some())
    }

    /// Nest `child` inside this document, within this document's limits.
    pub fn add_child(&mut self, child: Document) -> Result<(), FieldError> {
        // This document's object, `_children`, then the child's own levels.
        self.admit_depth(2 + child.depth())?;
        let framing = if self.children.is_empty() {
            CHILDREN_BYTES
        } else {
            0
        };
        self.admit_bytes(self.bytes.saturating_add(framing + child.bytes + 1))?;
        self.bytes += framing + child.bytes + 1;
        self.children.push(child);
        Ok(())
    }

    pub fn children(&self) -> &[Document] {
        &self.children
    }

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
        (self.id.len() + 10).max(MIN_DOCUMENT_BYTES) + run_id_bytes(self.run_id.as_deref()) + fields
    }

    /// Measure a freshly built document and check it against `limits`.
    fn admitted(mut self, limits: DocLimits) -> Result<Self, FieldError> {
        self.bytes = self.measure_bytes();
        self.within(limits)
    }

    /// This (measured) document, checked against `limits` and built
    /// further under them.
    fn within(mut self, limits: DocLimits) -> Result<Self, FieldError> {
        self.limits = limits;
        let depth = self.depth();
        if depth > limits.depth() {
            return Err(FieldError::TooLarge(format!(
                "document `{}` is nested {depth} levels deep, over the limit of {} (limits.max_depth)",
                self.id,
                limits.depth()
            )));
        }
        if self.bytes > limits.max_bytes {
            return Err(FieldError::TooLarge(format!(
                "document `{}` is about {} bytes, over the limit of {} (limits.max_document_mib)",
                self.id,
                self.bytes,
                human_bytes(limits.max_bytes)
            )));
        }
        Ok(self)
    }

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
    /// are left out, reserved names included.
    pub fn to_json_string_shaped(&self, include: Option<&[String]>, exclude: &[String]) -> String {
        let Some(include) = include else {
            if exclude.is_empty() {
                return self.to_json_string();
            }
            let names: Vec<&str> = self.fields.keys().map(String::as_str).collect();
            return self.shaped(names.into_iter().chain([CHILDREN_FIELD]), exclude);
        };
        self.shaped(include.iter().map(String::as_str), exclude)
    }

    fn shaped<'a>(&self, names: impl Iterator<Item = &'a str>, exclude: &[String]) -> String {
        let kept = |name: &str| !exclude.iter().any(|e| e == name);
        let mut out = Vec::with_capacity(self.approx_json_bytes());
        let mut first = true;
        let mut key = |out: &mut Vec<u8>, name: &str| {
            out.push(if std::mem::take(&mut first) {
                b'{'
            } else {
                b','
            });
            json::write_str(out, name);
            out.push(b':');
        };
        if kept(ID_FIELD) {
            key(&mut out, ID_FIELD);
            json::write_str(&mut out, &self.id);
        }
        if let Some(run_id) = self.run_id.as_deref().filter(|_| kept(RUN_ID_FIELD)) {
            key(&mut out, RUN_ID_FIELD);
            json::write_str(&mut out, run_id);
        }
        for name in names.filter(|n| kept(n)) {
            if name == CHILDREN_FIELD {
                if !self.children.is_empty() {
                    key(&mut out, CHILDREN_FIELD);
                    out.push(b'[');
                    for (i, child) in self.children.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        child.write_json(&mut out);
                    }
                    out.push(b']');
                }
            } else if let Some(value) = self.fields.get(name) {
                key(&mut out, name);
                json::write_value(&mut out, value);
            }
        }
        if first {
            out.push(b'{');
        }
        out.push(b'}');
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
                .map(Document::nested_from_json)
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
        let Value::Object(fields) = parse_value_within(text, limits.max_bytes)? else {
            return Err(FieldError::InvalidJson(
                "fields must be a JSON object".into(),
            ));
        };
        let mut doc = Self {
            id: id.into(),
            fields,
            ..Self::default()
        };
        for reserved in RESERVED_FIELDS {
            doc.fields.shift_remove(reserved);
        }
        doc.admitted(limits)
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
        use serde::de::DeserializeSeed;
        let mut reader = serde_json::Deserializer::from_str(text);
        let doc = DocumentSeed { limits }
            .deserialize(&mut reader)
            .and_then(|doc| reader.end().map(|()| doc))
            .map_err(parse_error)?;
        // Measured and checked against `limits` by the seed already.
        Ok(doc)
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

/// Refuse document `id` growing from `before` to `after` bytes past
/// `limits`. Changes that do not grow a document are always allowed.
fn admit_bytes(id: &str, limits: DocLimits, before: usize, after: usize) -> Result<(), FieldError> {
    let max = limits.max_bytes;
    // `usize::MAX`: a size that saturated on the way (a huge index).
    if after == usize::MAX || (after > max && after > before) {
        return Err(FieldError::TooLarge(format!(
            "document `{id}` would grow to about {after} bytes, over the limit of {} (limits.max_document_mib)",
            human_bytes(max)
        )));
    }
    Ok(())
}

/// What `,"_children":[]` adds.
const CHILDREN_BYTES: usize = 15;

/// The least a document counts for, fields aside: what the host holds for
/// one, so a document of many tiny nested children is measured by memory.
pub const MIN_DOCUMENT_BYTES: usize = std::mem::size_of::<Document>();

/// The least any value counts for in a document's size: what the host holds
/// for a value (its slot), so many tiny values are measured by memory too.
pub const MIN_VALUE_BYTES: usize = std::mem::size_of::<Value>();

/// What a field or object entry counts for besides its key and value: its
/// hash, the key's header and its index (`"`, `"`, `:` and `,` as JSON).
const ENTRY_BYTES: usize = 40;

fn run_id_bytes(run_id: Option<&str>) -> usize {
    run_id.map_or(0, |r| r.len() + 12)
}

fn human_bytes(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
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
        use serde::de::DeserializeSeed;
        DocumentSeed {
            limits: DocLimits::HOST,
        }
        .deserialize(deserializer)
    }
}

/// Reads a document under `limits`: its values are parsed within the size
/// budget (nothing larger is ever built), then it is checked.
struct DocumentSeed {
    limits: DocLimits,
}

impl<'de> serde::de::DeserializeSeed<'de> for DocumentSeed {
    type Value = Document;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Document, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for DocumentSeed {
    type Value = Document;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a document: a JSON object with a string `id`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        use serde::de::Error;
        let mut fields = Map::new();
        // The last of each reserved key counts, as in a parsed JSON object.
        let (mut id, mut run_id, mut children) = (None, None, None);
        let budget = ParseBudget::new(self.limits.max_bytes);
        while let Some(key) = map.next_key::<String>()? {
            budget.charge(entry_bytes(&key, 0))?;
            let value: Value = map.next_value_seed(budget.seed())?;
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
                .map(Document::nested_from_json)
                .collect::<Result<_, _>>()
                .map_err(A::Error::custom)?,
            Some(other) => {
                return Err(A::Error::custom(format!(
                    "`_children` must be an array, not {other}"
                )));
            }
            None => Vec::new(),
        };
        doc.admitted(self.limits).map_err(A::Error::custom)
    }
}

/// A parse error as a field error: over a limit, or not JSON (of the shape).
fn parse_error(e: serde_json::Error) -> FieldError {
    let message = e.to_string();
    if message.starts_with(OVER_BUDGET) {
        FieldError::TooLarge(format!("{message} (limits.max_document_mib)"))
    } else if message.contains("(limits.") {
        // A document's own check (size with framing, depth): it names its limit.
        FieldError::TooLarge(message)
    } else {
        FieldError::InvalidJson(message)
    }
}

/// JSON text as a value that counts at most `max_bytes` ([`value_bytes`]):
/// the parse stops as soon as the value would count more, so what is built
/// on the way never passes the limit, whatever the text.
pub fn parse_value_within(text: &str, max_bytes: usize) -> Result<Value, FieldError> {
    use serde::de::DeserializeSeed;
    // Text far longer than the limit (whitespace aside, JSON text is about
    // as long as what it builds) is refused before it is read at all.
    if text.len() > max_bytes.saturating_mul(4).saturating_add(1 << 10) {
        return Err(FieldError::TooLarge(format!(
            "{OVER_BUDGET}: {} bytes of JSON text for a limit of {max_bytes} bytes (limits.max_document_mib)",
            text.len()
        )));
    }
    let mut reader = serde_json::Deserializer::from_str(text);
    let budget = ParseBudget::new(max_bytes);
    budget
        .seed()
        .deserialize(&mut reader)
        .and_then(|v| reader.end().map(|()| v))
        .map_err(parse_error)
}

/// How the bounded parse's errors start.
const OVER_BUDGET: &str = "JSON over the size limit";

/// What a parse may still build, in [`value_bytes`].
struct ParseBudget {
    left: std::cell::Cell<usize>,
    max: usize,
}

impl ParseBudget {
    fn new(max: usize) -> Self {
        Self {
            left: std::cell::Cell::new(max),
            max,
        }
    }

    fn charge<E: serde::de::Error>(&self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(E::custom(format!(
                "{OVER_BUDGET} of {}",
                human_bytes(self.max)
            ))),
        }
    }

    fn seed(&self) -> Budgeted<'_> {
        Budgeted { budget: self }
    }
}

/// The key under which serde_json hands a number's text to a visitor.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Builds a [`Value`], charging each part to the budget before it is built
/// (the same amounts [`value_bytes`] counts). serde_json stops nesting at
/// 128 levels; the document's own check is tighter.
struct Budgeted<'a> {
    budget: &'a ParseBudget,
}

impl<'de> serde::de::DeserializeSeed<'de> for Budgeted<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Budgeted<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::Null)
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::from(n))
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::from(n))
    }

    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Value, E> {
        self.budget.charge((s.len() + 2).max(MIN_VALUE_BYTES))?;
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Value, E> {
        self.budget.charge((s.len() + 2).max(MIN_VALUE_BYTES))?;
        Ok(Value::String(s))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.budget.seed())? {
            self.budget.charge(1)?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // Numbers are kept exactly as written (serde_json's
            // `arbitrary_precision`): they arrive as a one-entry map holding
            // the number's text under this reserved key.
            if out.is_empty() && key == NUMBER_TOKEN {
                let text: String = map.next_value()?;
                self.budget.charge(text.len().max(MIN_VALUE_BYTES))?;
                let number = text.parse().map_err(serde::de::Error::custom)?;
                return Ok(Value::Number(number));
            }
            self.budget.charge(entry_bytes(&key, 0))?;
            let value = map.next_value_seed(self.budget.seed())?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
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
        d.add_child(child).expect("add_child");
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
        // Small values count what the host holds for them (MIN_VALUE_BYTES
        // each): more than their text, never less.
        assert!(approx >= real && approx <= real * 3, "{approx} vs {real}");
        let mut text = Document::new("t");
        text.set("body", json!("y".repeat(5000))).expect("set");
        text.set("title", json!("a title of a few words"))
            .expect("set");
        let real = text.to_json_string().len();
        let approx = text.approx_json_bytes();
        assert!(
            approx >= real && approx * 100 <= real * 110,
            "text: about its JSON: {approx} vs {real}"
        );
    }

    #[test]
    fn from_fields_json_leaves_reserved_keys_out() {
        let d = Document::from_fields_json_str(
            "x",
            r#"{"id": "y", "run_id": "r", "a": 1}"#,
            DocLimits::default(),
        )
        .expect("valid");
        assert_eq!(d.id(), "x");
        assert_eq!(d.run_id(), None);
        assert_eq!(d.field_names().collect::<Vec<_>>(), ["a"]);
        assert!(Document::from_fields_json_str("x", "[1]", DocLimits::default()).is_err());
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

    fn small(max_bytes: usize, max_depth: usize) -> Document {
        let mut d = Document::new("d");
        d.set_limits(DocLimits {
            max_bytes,
            max_depth,
        });
        d
    }

    /// The cached size is what measuring from scratch gives.
    fn assert_measured(d: &Document) {
        assert_eq!(d.approx_json_bytes(), d.measure_bytes(), "{d:?}");
    }

    #[test]
    fn the_cached_size_follows_every_change() {
        let mut d = doc();
        assert_measured(&d);
        d.set("a", json!({"x": [1, 2, {"y": null}]})).expect("set");
        d.add("tags", json!("c")).expect("add");
        d.add("fresh", json!([1])).expect("add");
        d.set_or_add("title", json!("again")).expect("set_or_add");
        d.set_or_add("new", json!(1)).expect("set_or_add");
        d.set_path("p.q[3].r", json!("deep")).expect("set_path");
        d.set_path("p.q[1]", json!(7)).expect("set_path");
        d.set_path("a.x[2].z", json!(true)).expect("set_path");
        d.set_path("a.x[5]", json!(1)).expect("set_path");
        assert_measured(&d);
        d.rename("title", "tags", UpdateMode::Append)
            .expect("rename");
        d.rename("new", "moved", UpdateMode::Overwrite)
            .expect("rename");
        d.rename("fresh", "moved", UpdateMode::Overwrite)
            .expect("rename");
        d.rename("a", "moved", UpdateMode::Skip).expect("rename");
        d.set("single", json!("s")).expect("set");
        d.rename("tags", "single", UpdateMode::Append)
            .expect("rename");
        assert_measured(&d);
        assert!(d.remove_path("p.q[3].r").expect("remove_path"));
        assert!(d.remove_path("p.q[0]").expect("remove_path"));
        assert!(d.remove("moved").expect("remove"));
        let mut child = Document::new("c");
        child.set("n", json!([1, 2])).expect("set");
        d.add_child(child.clone()).expect("add_child");
        d.add_child(child).expect("add_child");
        d.set_run_id(Some("another run".into()));
        assert_measured(&d);
        d.clear_run_ids();
        assert_measured(&d);
        d.load_json(json!({"only": [1, {"two": 2}], "_children": [{"id": "k"}]}))
            .expect("load");
        assert_measured(&d);
    }

    #[test]
    fn a_deep_path_is_refused_before_it_is_built() {
        let mut d = small(16 << 20, 64);
        let deep = vec!["a"; 100_000].join(".");
        let e = d.set_path(&deep, json!(1)).expect_err("too deep");
        assert!(
            e.to_string().contains("levels deep") && e.to_string().contains("limits.max_depth"),
            "{e}"
        );
        assert!(!d.has("a"), "nothing was built");
        let ok = vec!["a"; 64].join(".");
        d.set_path(&ok, json!(1)).expect("64 steps: 64 levels");
        assert_eq!(d.depth(), 64);
        let e = d
            .set_path(&ok, json!({"x": 1}))
            .expect_err("one more level");
        assert!(matches!(e, FieldError::TooLarge(_)), "{e}");
        // A deep JSON value counts as much as a deep path.
        let nested: Value = serde_json::from_str(&format!("{}1{}", "[".repeat(80), "]".repeat(80)))
            .expect("80 levels");
        assert!(d.set("v", nested.clone()).is_err());
        assert!(d.add("v", nested).is_err());
        assert_measured(&d);
    }

    #[test]
    fn a_huge_array_index_is_refused_without_allocating() {
        let mut d = small(1 << 20, 64);
        for index in [
            u64::MAX.to_string(),
            (usize::MAX - 1).to_string(),
            "999999999".into(),
        ] {
            let e = d
                .set_path(&format!("a[{index}]"), json!(1))
                .expect_err("too large");
            assert!(matches!(e, FieldError::TooLarge(_)), "{index}: {e}");
            let e = d
                .set_path(&format!("b.c[{index}].d"), json!(1))
                .expect_err("too large");
            assert!(matches!(e, FieldError::TooLarge(_)), "{index}: {e}");
        }
        assert_eq!(d.field_names().count(), 0);
        // Within the limit the array is padded with nulls, and measured.
        d.set_path("a[1000]", json!(1))
            .expect("1001 values fit in 1 MiB");
        assert_eq!(d.get_path("a[1000]").expect("path"), Some(&json!(1)));
        assert_measured(&d);
        // Even with no byte limit, an index cannot overflow.
        let mut host = Document::new("h");
        host.set_limits(DocLimits::HOST);
        assert!(
            host.set_path(&format!("a[{}]", usize::MAX), json!(1))
                .is_err()
        );
    }

    #[test]
    fn documents_cannot_grow_past_their_byte_limit() {
        let mut d = small(4096, 64);
        d.set("a", json!("x".repeat(3000))).expect("fits");
        let e = d.set("b", json!("y".repeat(2000))).expect_err("too large");
        assert!(e.to_string().contains("limits.max_document_mib"), "{e}");
        assert!(d.add("a", json!("y".repeat(2000))).is_err());
        assert!(d.set_path("c.d", json!("y".repeat(2000))).is_err());
        // Replacing a large value with a smaller one is always fine.
        d.set("a", json!("small")).expect("shrinks");
        // Many tiny values count at least MIN_VALUE_BYTES each.
        let e = d
            .set("nulls", Value::Array(vec![Value::Null; 200]))
            .expect_err("200 nulls count as ~6.6 KB");
        assert!(matches!(e, FieldError::TooLarge(_)));
        let mut parent = small(4096, 64);
        let mut child = Document::new("c");
        child.set("a", json!("x".repeat(3000))).expect("child");
        parent.add_child(child.clone()).expect("one fits");
        assert!(parent.add_child(child).is_err(), "two do not");
        assert_measured(&parent);
    }

    #[test]
    fn nested_children_count_toward_depth() {
        let mut chain = Document::new("leaf");
        let mut refused = None;
        for level in 0..100 {
            let mut parent = Document::new(format!("p{level}"));
            match parent.add_child(chain.clone()) {
                Ok(()) => chain = parent,
                Err(e) => {
                    refused = Some((level, e));
                    break;
                }
            }
        }
        let (level, e) = refused.expect("a deep chain is refused");
        assert!(e.to_string().contains("limits.max_depth"), "{e}");
        // 64 levels: the leaf's 1 and 2 for each parent.
        assert_eq!(level, 31, "{e}");
        assert_eq!(chain.depth(), 63);
        let text = chain.to_json_string();
        assert_eq!(Document::from_json_str(&text).expect("read back"), chain);
    }

    #[test]
    fn parsed_documents_are_checked_against_limits() {
        let deep = format!(
            r#"{{"id":"d","a":{}1{}}}"#,
            "[".repeat(110),
            "]".repeat(110)
        );
        let e = Document::from_json_str(&deep).expect_err("deeper than MAX_DEPTH");
        assert!(e.to_string().contains("levels deep"), "{e}");
        let way_too_deep = format!(r#"{{"id":"d","a":{}}}"#, "[".repeat(100_000));
        assert!(
            Document::from_json_str(&way_too_deep).is_err(),
            "no stack overflow"
        );
        let ok = format!(r#"{{"id":"d","a":{}1{}}}"#, "[".repeat(80), "]".repeat(80));
        Document::from_json_str(&ok).expect("the host reads 81 levels");
        let e = Document::from_json_str_within(&ok, DocLimits::default())
            .expect_err("a plugin's default is 64");
        assert!(e.to_string().contains("limits.max_depth"), "{e}");
        let big = format!(r#"{{"id":"d","a":"{}"}}"#, "x".repeat(5000));
        let limits = DocLimits {
            max_bytes: 4096,
            max_depth: 64,
        };
        assert!(Document::from_json_str_within(&big, limits).is_err());
        assert!(Document::from_fields_json_str("d", &big[10..], limits).is_err());
        let mut d = small(4096, 64);
        assert!(
            d.load_json(serde_json::from_str(&big).expect("json"))
                .is_err()
        );
    }

    #[test]
    fn many_tiny_children_count_for_what_they_hold() {
        let children = vec![r#"{"id":"c"}"#; 300_000].join(",");
        let text = format!(r#"{{"id":"p","_children":[{children}]}}"#);
        assert!(text.len() < 4 << 20, "about 3.3 MB of JSON");
        let e = Document::from_json_str_within(&text, DocLimits::default())
            .expect_err("300,000 documents are more than 16 MiB of host memory");
        assert!(e.to_string().contains("limits.max_document_mib"), "{e}");
        let mut parent = small(1 << 20, 64);
        let mut added = 0;
        while parent.add_child(Document::new("c")).is_ok() {
            added += 1;
        }
        assert!(
            added < (1 << 20) / MIN_DOCUMENT_BYTES,
            "{added} children in 1 MiB"
        );
        assert_measured(&parent);
    }

    #[test]
    fn wrapping_a_value_in_an_array_counts_the_level_it_adds() {
        let mut d = small(16 << 20, 3);
        d.set("a", json!({"b": {"c": 1}})).expect("3 levels of 3");
        let e = d.add("a", json!(1)).expect_err("wrapping makes 4");
        assert!(e.to_string().contains("limits.max_depth"), "{e}");
        d.set("x", json!(1)).expect("set");
        let e = d
            .rename("x", "a", UpdateMode::Append)
            .expect_err("so does appending onto it");
        assert!(e.to_string().contains("limits.max_depth"), "{e}");
        assert!(d.depth() <= 3);
        assert_measured(&d);
    }

    #[test]
    fn json_is_parsed_within_its_budget() {
        let nulls = format!("[{}null]", "null,".repeat(1_000_000));
        let e = parse_value_within(&nulls, 1 << 20).expect_err("a million values");
        assert!(e.to_string().contains("limits.max_document_mib"), "{e}");
        let ok = parse_value_within(r#"{"a":[1,"two",null]}"#, 1 << 20).expect("small");
        assert_eq!(ok, json!({"a": [1, "two", null]}));
        assert!(matches!(
            parse_value_within("[1,", 1 << 20),
            Err(FieldError::InvalidJson(_))
        ));
        let doc = format!(r#"{{"id":"d","f":{nulls}}}"#);
        assert!(matches!(
            Document::from_json_str_within(&doc, DocLimits::default()),
            Err(FieldError::TooLarge(_))
        ));
    }

    #[test]
    fn loaded_children_claim_no_run() {
        let mut d = doc();
        d.load_json(json!({"_children": [{"id": "c", "run_id": "forged"}]}))
            .expect("load");
        assert_eq!(d.children()[0].run_id(), None);
        assert_eq!(d.run_id(), Some("r"));
        assert_measured(&d);
    }

    #[test]
    fn run_ids_are_cleared_all_the_way_down() {
        let mut d = doc();
        let mut child = Document::new("c");
        child.set_run_id(Some("someone else's".into()));
        d.add_child(child).expect("add_child");
        d.clear_run_ids();
        assert_eq!(d.run_id(), None);
        assert_eq!(d.children()[0].run_id(), None);
        assert_measured(&d);
    }
}
