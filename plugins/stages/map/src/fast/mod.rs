//! The fast engine: the common part of jq (paths, updates, `del`,
//! `select`, `if`, string functions, ...) run on the document's fields
//! directly, without jaq's general machinery, about four times cheaper.
//!
//! A program is taken on only if every part of it is in that common part
//! (`compile`); anything else runs in jaq alone. A document is taken on
//! only while the answer is certain to be jaq's: at anything else (a jq
//! error, a number past 64 bits, a product of two streams) the engine
//! stops and jaq runs the program on that document from the start, so
//! the two engines never differ in what they make of a document (the
//! tests compare them on a corpus of programs and documents).

mod builtins;
mod compile;
mod eval;
mod fields;
mod value;

use std::collections::HashMap;
use std::rc::Rc;

pub use value::Fallback;
use value::{Result, V};

use crate::program::HOST_FIELDS;

pub struct Fast {
    op: compile::Op,
}

impl Fast {
    /// The program as the fast engine's, if all of it is in its language.
    pub fn compile(code: &str) -> Option<Self> {
        let term = jaq_core::load::parse(code, |p| p.term())?;
        let op = compile::compile(&term, &mut Vec::new())?;
        Some(Self { op })
    }

    /// The fields the program touches the document through, if it touches
    /// it only through fields it names (`fields.rs`).
    pub fn fields_used(&self) -> Option<Vec<String>> {
        fields::named(&self.op)
    }

    /// What the program makes of the document (`None`: it is dropped): the
    /// fields to write (JSON) or remove, in jaq's order.
    #[allow(clippy::type_complexity)]
    pub fn run<'f>(
        &self,
        id: Option<&str>,
        fields: impl Iterator<Item = (&'f str, &'f str)>,
    ) -> Result<Option<Vec<(String, Option<String>)>>> {
        let mut before = Vec::new();
        if let Some(id) = id {
            before.push((Rc::from("id"), V::str(id)));
        }
        for (name, json) in fields {
            before.push((Rc::from(name), V::parse(json)?));
        }
        let input = V::Obj(Rc::new(before));
        let mut outs = eval::Eval::default().run(&self.op, &input)?.into_iter();
        let first = match (outs.next(), outs.next()) {
            (None, _) => return Ok(None),
            (Some(first), None) => first,
            // More than one: jaq's to refuse.
            (Some(_), Some(_)) => return Err(Fallback),
        };
        let (V::Obj(after), V::Obj(before)) = (first, input) else {
            return Err(Fallback);
        };
        changes(id, &before, &after).map(Some)
    }
}

/// What differs between the fields `before` and `after`: set, then removed.
#[allow(clippy::type_complexity)]
fn changes(
    id: Option<&str>,
    before: &[(Rc<str>, V)],
    after: &[(Rc<str>, V)],
) -> Result<Vec<(String, Option<String>)>> {
    let (old, new) = (Fields::of(before), Fields::of(after));
    let mut changed = Vec::new();
    for (name, value) in after {
        if &**name == "id" {
            match (id, value) {
                (Some(id), V::Str(same)) if &**same == id => continue,
                _ => return Err(Fallback),
            }
        }
        if HOST_FIELDS.contains(&&**name) {
            return Err(Fallback);
        }
        if !matches!(old.get(name), Some(old) if old.same(value)?) {
            changed.push((name.to_string(), Some(value.to_json())));
        }
    }
    for (name, _) in before {
        if new.get(name).is_none() {
            if &**name == "id" {
                return Err(Fallback);
            }
            changed.push((name.to_string(), None));
        }
    }
    Ok(changed)
}

/// An object's fields by name: searched when few, indexed when many (a
/// document may have any number of fields).
enum Fields<'v> {
    Few(&'v [(Rc<str>, V)]),
    Many(HashMap<&'v str, &'v V>),
}

impl<'v> Fields<'v> {
    fn of(fields: &'v [(Rc<str>, V)]) -> Self {
        if fields.len() <= 16 {
            Self::Few(fields)
        } else {
            Self::Many(fields.iter().map(|(n, v)| (&**n, v)).collect())
        }
    }

    fn get(&self, name: &str) -> Option<&'v V> {
        match self {
            Self::Few(fields) => fields.iter().find(|(n, _)| &**n == name).map(|(_, v)| v),
            Self::Many(index) => index.get(name).copied(),
        }
    }
}
