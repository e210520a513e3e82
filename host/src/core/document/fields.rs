//! A document's top-level fields: a list of names and values in insertion
//! order, searched in place while it is short, indexed once it is long.
//!
//! Documents mostly hold a handful of fields, and they change threads as
//! they move down a pipeline, so they are usually cold in the cache where
//! they are read. Looking a name up in a short list touches only the list,
//! which the value read next is in anyway; a hash table would be one more
//! allocation per document and one more cache miss per lookup. Past
//! [`INDEXED_FROM`] fields a table of positions (hashed with foldhash,
//! seeded per table, so a tenant cannot pick names that collide) keeps a
//! lookup at one probe, however many fields a document has.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use serde_json::Value;

/// A field name: names up to 24 bytes are held inline, with no allocation
/// of their own (a connector's documents have a handful of short names).
pub type FieldName = compact_str::CompactString;

/// How many fields a document holds before its names are indexed.
const INDEXED_FROM: usize = 16;

/// The fields of a document, by name, in insertion order.
#[derive(Clone, Default)]
pub struct Fields {
    entries: Vec<(FieldName, Value)>,
    index: Option<Box<Index>>,
}

/// Positions in `entries` by name.
#[derive(Clone)]
struct Index {
    table: HashTable<usize>,
    hasher: foldhash::fast::RandomState,
}

impl Index {
    fn of(entries: &[(FieldName, Value)]) -> Box<Self> {
        let mut index = Box::new(Self {
            table: HashTable::with_capacity(entries.len()),
            hasher: foldhash::fast::RandomState::default(),
        });
        for (at, (name, _)) in entries.iter().enumerate() {
            index.add(entries, name, at);
        }
        index
    }

    fn find(&self, entries: &[(FieldName, Value)], name: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(name);
        self.table.find(hash, |&at| entries[at].0 == name).copied()
    }

    /// Forget the entry at `at`, which is leaving the list: the positions
    /// after it move down by one.
    fn remove(&mut self, name: &str, at: usize) {
        let hash = self.hasher.hash_one(name);
        if let Ok(slot) = self.table.find_entry(hash, |&i| i == at) {
            slot.remove();
        }
        for position in self.table.iter_mut().filter(|p| **p > at) {
            *position -= 1;
        }
    }

    fn add(&mut self, entries: &[(FieldName, Value)], name: &str, at: usize) {
        let hasher = &self.hasher;
        self.table.insert_unique(hasher.hash_one(name), at, |&i| {
            hasher.hash_one(entries[i].0.as_str())
        });
    }
}

impl Fields {
    /// Room for `capacity` fields.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: Vec::with_capacity(capacity),
            index: None,
        }
    }

    fn position(&self, name: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.find(&self.entries, name),
            None => self.entries.iter().position(|(n, _)| n == name),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.position(name).map(|at| &self.entries[at].1)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        self.position(name).map(|at| &mut self.entries[at].1)
    }

    /// Make `name` hold `value`, in its place when present (giving back the
    /// value it held), else last.
    pub fn insert(&mut self, name: FieldName, value: Value) -> Option<Value> {
        if let Some(at) = self.position(&name) {
            return Some(std::mem::replace(&mut self.entries[at].1, value));
        }
        self.push(name, value);
        None
    }

    /// The value of `name`, first set to null when absent.
    pub fn get_or_insert_null(&mut self, name: &str) -> &mut Value {
        let at = match self.position(name) {
            Some(at) => at,
            None => {
                self.push(name.into(), Value::Null);
                self.entries.len() - 1
            }
        };
        &mut self.entries[at].1
    }

    /// Add a field not present.
    fn push(&mut self, name: FieldName, value: Value) {
        let at = self.entries.len();
        self.entries.push((name, value));
        match &mut self.index {
            Some(index) => index.add(&self.entries, &self.entries[at].0, at),
            None if self.entries.len() > INDEXED_FROM => {
                self.index = Some(Index::of(&self.entries));
            }
            None => {}
        }
    }

    /// Remove `name`, keeping the order of the others; its value, if it
    /// was present.
    pub fn shift_remove(&mut self, name: &str) -> Option<Value> {
        let at = self.position(name)?;
        let (_, value) = self.entries.remove(at);
        if self.entries.len() <= INDEXED_FROM {
            // Short again: searched in place.
            self.index = None;
        } else if let Some(index) = &mut self.index {
            // One pass over the positions, as the list shifts anyway: no
            // name is hashed again.
            index.remove(name, at);
        }
        Some(value)
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &FieldName> {
        self.entries.iter().map(|(name, _)| name)
    }

    pub fn values(&self) -> impl ExactSizeIterator<Item = &Value> {
        self.entries.iter().map(|(_, value)| value)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&FieldName, &Value)> {
        self.entries.iter().map(|(name, value)| (name, value))
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = (&'a FieldName, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (FieldName, Value)>,
        fn(&'a (FieldName, Value)) -> (&'a FieldName, &'a Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(name, value)| (name, value))
    }
}

impl IntoIterator for Fields {
    type Item = (FieldName, Value);
    type IntoIter = std::vec::IntoIter<(FieldName, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

/// Later values of a name given twice win, in the place of its first.
impl FromIterator<(FieldName, Value)> for Fields {
    fn from_iter<I: IntoIterator<Item = (FieldName, Value)>>(items: I) -> Self {
        let items = items.into_iter();
        let mut fields = Self::with_capacity(items.size_hint().0);
        for (name, value) in items {
            fields.insert(name, value);
        }
        fields
    }
}

/// The value of a field that must be there (tests, mostly).
impl std::ops::Index<&str> for Fields {
    type Output = Value;
    fn index(&self, name: &str) -> &Value {
        self.get(name)
            .unwrap_or_else(|| panic!("no field `{name}` in the document"))
    }
}

/// Fields are equal when they hold the same names with the same values,
/// in any order (as JSON objects are).
impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(name, value)| other.get(name) == Some(value))
    }
}

impl std::fmt::Debug for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::{FieldName, Fields, INDEXED_FROM};

    /// What a change does to the fields: the same as to an ordered map.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, i64),
        Remove(u8),
        Null(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Names from a set wider than the index threshold, so documents
        // cross it both ways.
        let name = 0..(3 * INDEXED_FROM as u8);
        prop_oneof![
            (name.clone(), any::<i64>()).prop_map(|(n, v)| Op::Insert(n, v)),
            name.clone().prop_map(Op::Remove),
            name.prop_map(Op::Null),
        ]
    }

    proptest! {
        /// Short or indexed, the fields answer as an `IndexMap` does.
        #[test]
        fn fields_behave_as_an_ordered_map(ops in proptest::collection::vec(op(), 0..400)) {
            let mut fields = Fields::default();
            let mut model: indexmap::IndexMap<String, serde_json::Value> = indexmap::IndexMap::new();
            for op in ops {
                match op {
                    Op::Insert(n, v) => {
                        let name = format!("f{n}");
                        prop_assert_eq!(
                            fields.insert(FieldName::from(name.as_str()), json!(v)),
                            model.insert(name, json!(v))
                        );
                    }
                    Op::Remove(n) => {
                        let name = format!("f{n}");
                        prop_assert_eq!(fields.shift_remove(&name), model.shift_remove(&name));
                    }
                    Op::Null(n) => {
                        let name = format!("f{n}");
                        fields.get_or_insert_null(&name);
                        model.entry(name).or_insert(serde_json::Value::Null);
                    }
                }
                prop_assert_eq!(fields.index.is_some(), fields.len() > INDEXED_FROM);
                let order: Vec<&str> = fields.keys().map(FieldName::as_str).collect();
                let expected: Vec<&str> = model.keys().map(String::as_str).collect();
                prop_assert_eq!(order, expected);
                for n in 0..(3 * INDEXED_FROM as u8) {
                    let name = format!("f{n}");
                    prop_assert_eq!(fields.get(&name), model.get(&name));
                }
            }
        }
    }

    #[test]
    fn equal_fields_may_come_in_another_order() {
        let a: Fields = [("x".into(), json!(1)), ("y".into(), json!(2))]
            .into_iter()
            .collect();
        let b: Fields = [("y".into(), json!(2)), ("x".into(), json!(1))]
            .into_iter()
            .collect();
        assert_eq!(a, b);
        let c: Fields = [("x".into(), json!(1))].into_iter().collect();
        assert_ne!(a, c);
    }
}
