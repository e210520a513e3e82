//! Which of the document's fields a program touches, when it touches the
//! document only through fields it names: then the stage reads just those
//! (the `fields` setting, worked out), and what the program makes of the
//! document is the same.
//!
//! The document (the root) may flow through updates, `del`, `select`,
//! `if` and `as` bindings of values; anything that could see the root whole
//! (`.` as a value, `keys`, `has`, `tostring`, `{...}` made anew, `.[0]`,
//! `.[]`, `.id`) leaves the answer `None`, and the stage reads every field.

use std::rc::Rc;

use super::compile::{Key, Op, Piece, Step};
use super::value::V;

/// The root fields `op` names, in the order first named, if it touches the
/// document only through them; `None` else (or if it names none).
pub fn named(op: &Op) -> Option<Vec<String>> {
    let mut names = Names::default();
    names.transform(op)?;
    let names = names.0;
    // `id` and the host's fields are not fields a stage reads: a program
    // that names them sees the whole document (and is told what it may not
    // change).
    let host = names
        .iter()
        .any(|n| weir_plugin::RESERVED_FIELDS.contains(&&**n));
    (!names.is_empty() && !host).then(|| names.iter().map(|n| n.to_string()).collect())
}

#[derive(Default)]
struct Names(Vec<Rc<str>>);

impl Names {
    fn add(&mut self, name: &Rc<str>) {
        if !self.0.contains(name) {
            self.0.push(name.clone());
        }
    }

    /// `op` takes the root and gives it back changed (or nothing).
    fn transform(&mut self, op: &Op) -> Option<()> {
        match op {
            Op::Id | Op::Empty => Some(()),
            Op::Update(path, f, how) => {
                let Some(Step::Key(Key::Name(name))) = path.first() else {
                    return None;
                };
                self.add(name);
                match how {
                    // `f` gets the value at the path, not the root.
                    super::compile::How::Modify => Some(()),
                    _ => self.value(f),
                }
            }
            Op::Delete(paths) => paths.iter().try_for_each(|path| match path.first() {
                Some(Key::Name(name)) => {
                    self.add(name);
                    Some(())
                }
                _ => None,
            }),
            Op::Pipe(l, r) => {
                self.transform(l)?;
                self.transform(r)
            }
            Op::If(branches, otherwise) => {
                for (cond, then) in branches {
                    self.value(cond)?;
                    self.transform(then)?;
                }
                otherwise.as_deref().map_or(Some(()), |e| self.transform(e))
            }
            Op::Call1(super::compile::Fn1::Select, cond) => self.value(cond),
            Op::Bind(l, r) => {
                self.value(l)?;
                self.transform(r)
            }
            _ => None,
        }
    }

    /// `op` takes the root and gives values that are not it.
    fn value(&mut self, op: &Op) -> Option<()> {
        match op {
            Op::Lit(_) | Op::Var(_) | Op::Empty => Some(()),
            Op::Path(base, steps) => {
                let mut steps = steps.iter();
                if let Op::Id = **base {
                    // The first step from the root names a field.
                    let Some(Step::Key(Op::Lit(V::Str(name)))) = steps.next() else {
                        return None;
                    };
                    self.add(name);
                } else {
                    self.value(base)?;
                }
                // Keys are computed from the root too.
                steps.try_for_each(|step| match step {
                    Step::Key(key) => self.value(key),
                    Step::Each => Some(()),
                })
            }
            // `r` gets what `l` gives, never the root.
            Op::Pipe(l, _) => self.value(l),
            Op::Text(pieces) => pieces.iter().try_for_each(|p| match p {
                Piece::Text(_) => Some(()),
                Piece::Op(op) => self.value(op),
            }),
            Op::Collect(inner) => inner.as_deref().map_or(Some(()), |f| self.value(f)),
            Op::Object(entries) => entries.iter().try_for_each(|(k, v)| {
                self.value(k)?;
                self.value(v)
            }),
            Op::Neg(inner) => self.value(inner),
            Op::Comma(l, r)
            | Op::Alt(l, r)
            | Op::And(l, r)
            | Op::Or(l, r)
            | Op::Math(_, l, r)
            | Op::Cmp(_, l, r)
            | Op::Bind(l, r) => {
                self.value(l)?;
                self.value(r)
            }
            // No `else` gives the root itself.
            Op::If(branches, Some(otherwise)) => {
                for (cond, then) in branches {
                    self.value(cond)?;
                    self.value(then)?;
                }
                self.value(otherwise)
            }
            _ => None,
        }
    }
}
