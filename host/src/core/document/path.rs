//! Nested paths such as `a.b[2].c`: parsing them, and reading, setting and
//! removing the value one names.

use serde_json::{Map, Value};

use super::sizing::{MIN_VALUE_BYTES, container_depth, entry_bytes, value_bytes};
use super::{Document, FieldError, check_name};

impl Document {
    /// The value at a nested `path` such as `a.b[2].c`.
    pub fn get_path(&self, path: &str) -> Result<Option<&Value>, FieldError> {
        let steps = parse_path(path)?;
        let (Step::Key(first), rest) = split_first(&steps) else {
            return Err(invalid_path(path, "it must start with a field name"));
        };
        let found = self.fields.get(first.as_str());
        Ok(found.and_then(|node| rest.iter().try_fold(node, |node, step| step.child(node))))
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
        let mut node = self.fields.get_or_insert_null(first);
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
        let found = self.fields.get_mut(first.as_str());
        let Some(node) = found.and_then(|node| {
            between
                .iter()
                .try_fold(node, |node, step| step.child_mut(node))
        }) else {
            return Ok(false);
        };
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
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

impl Step {
    /// What this step reaches from `node`, if anything.
    fn child<'v>(&self, node: &'v Value) -> Option<&'v Value> {
        match (self, node) {
            (Step::Key(k), Value::Object(map)) => map.get(k),
            (Step::Index(i), Value::Array(items)) => items.get(*i),
            _ => None,
        }
    }

    /// [`Step::child`], to change.
    fn child_mut<'v>(&self, node: &'v mut Value) -> Option<&'v mut Value> {
        match (self, node) {
            (Step::Key(k), Value::Object(map)) => map.get_mut(k),
            (Step::Index(i), Value::Array(items)) => items.get_mut(*i),
            _ => None,
        }
    }
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
