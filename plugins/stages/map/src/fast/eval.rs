//! The fast engine's evaluation: each operation gives its values for one
//! input, as jaq would give them, or `Fallback` where jaq's answer is not
//! certain here (an error among them).

use std::rc::Rc;

use super::builtins::{call0, call1, compare, items, math};
use super::compile::{How, Key, Op, Piece, Step};
use super::value::{Fallback, Int, Result, V, position};

/// The values one operation gave: mostly one, so that one is not boxed.
#[derive(Default)]
pub enum Outs {
    #[default]
    Zero,
    One(V),
    Many(Vec<V>),
}

impl Outs {
    fn push(&mut self, v: V) {
        *self = match std::mem::take(self) {
            Outs::Zero => Outs::One(v),
            Outs::One(first) => Outs::Many(vec![first, v]),
            Outs::Many(mut all) => {
                all.push(v);
                Outs::Many(all)
            }
        };
    }

    fn extend(&mut self, more: Outs) {
        match (std::mem::take(self), more) {
            (Outs::Zero, more) => *self = more,
            (all, Outs::Zero) => *self = all,
            (all, more) => {
                *self = all;
                for v in more {
                    self.push(v);
                }
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Outs::Zero => 0,
            Outs::One(_) => 1,
            Outs::Many(all) => all.len(),
        }
    }

    /// The first value, if any.
    fn first(self) -> Option<V> {
        self.into_iter().next()
    }
}

impl IntoIterator for Outs {
    type Item = V;
    type IntoIter = std::iter::Chain<std::option::IntoIter<V>, std::vec::IntoIter<V>>;

    fn into_iter(self) -> Self::IntoIter {
        match self {
            Outs::Zero => None.into_iter().chain(Vec::new()),
            Outs::One(v) => Some(v).into_iter().chain(Vec::new()),
            Outs::Many(all) => None.into_iter().chain(all),
        }
    }
}

/// One run of a program: the variables bound so far.
#[derive(Default)]
pub struct Eval {
    vars: Vec<V>,
}

impl Eval {
    pub fn run(&mut self, op: &Op, input: &V) -> Result<Outs> {
        let mut outs = Outs::Zero;
        match op {
            Op::Id => outs.push(input.clone()),
            Op::Lit(v) => outs.push(v.clone()),
            Op::Empty => {}
            Op::Text(pieces) => return self.text(pieces, input),
            Op::Collect(inner) => {
                let items = match inner {
                    Some(inner) => self.run(inner, input)?.into_iter().collect(),
                    None => Vec::new(),
                };
                outs.push(V::Arr(Rc::new(items)));
            }
            Op::Object(entries) => return self.object(entries, input),
            Op::Neg(inner) => {
                for v in self.run(inner, input)? {
                    let V::Num(n) = &v else { return Err(Fallback) };
                    let i = Int::of(n)?.ok_or(Fallback)?;
                    outs.push(V::int(i.checked_neg().ok_or(Fallback)?));
                }
            }
            Op::Pipe(l, r) => {
                for v in self.run(l, input)? {
                    outs.extend(self.run(r, &v)?);
                }
            }
            Op::Bind(l, r) => {
                for v in self.run(l, input)? {
                    self.vars.push(v);
                    let more = self.run(r, input);
                    self.vars.pop();
                    outs.extend(more?);
                }
            }
            Op::Var(depth) => {
                let at = self.vars.len().checked_sub(depth + 1).ok_or(Fallback)?;
                outs.push(self.vars[at].clone());
            }
            Op::Comma(l, r) => {
                outs = self.run(l, input)?;
                outs.extend(self.run(r, input)?);
            }
            Op::Alt(l, r) => {
                for v in self.run(l, input)? {
                    if v.truthy() {
                        outs.push(v);
                    }
                }
                if outs.len() == 0 {
                    return self.run(r, input);
                }
            }
            Op::And(l, r) | Op::Or(l, r) => {
                let and = matches!(op, Op::And(..));
                let left = self.run(l, input)?;
                let many = left.len() > 1;
                for a in left {
                    if a.truthy() != and {
                        outs.push(V::Bool(!and));
                        continue;
                    }
                    let right = self.run(r, input)?;
                    if many && right.len() > 1 {
                        return Err(Fallback);
                    }
                    for b in right {
                        outs.push(V::Bool(b.truthy()));
                    }
                }
            }
            Op::Math(m, l, r) => {
                for (a, b) in self.pairs(l, r, input)? {
                    outs.push(math(*m, a, b)?);
                }
            }
            Op::Cmp(c, l, r) => {
                for (a, b) in self.pairs(l, r, input)? {
                    outs.push(V::Bool(compare(*c, &a, &b)?));
                }
            }
            Op::If(branches, otherwise) => {
                return self.branch(branches, otherwise.as_deref(), input);
            }
            Op::Path(base, steps) => {
                for v in self.run(base, input)? {
                    self.steps(v, steps, input, &mut outs)?;
                }
            }
            Op::Update(path, f, how) => return self.update(path, f, *how, input),
            Op::Delete(paths) => {
                let mut v = input.clone();
                for path in paths {
                    v = delete(v, path)?;
                }
                outs.push(v);
            }
            Op::Call0(f) => {
                if let Some(v) = call0(*f, input)? {
                    outs.push(v);
                }
            }
            Op::Call1(f, arg) => {
                for a in self.run(arg, input)? {
                    if let Some(v) = call1(*f, input, a)? {
                        outs.push(v);
                    }
                }
            }
        }
        Ok(outs)
    }

    /// The values of `l` and `r` paired; the order of a product of two
    /// streams is left to jaq.
    fn pairs(&mut self, l: &Op, r: &Op, input: &V) -> Result<Vec<(V, V)>> {
        let left = self.run(l, input)?;
        let right = self.run(r, input)?;
        if left.len() > 1 && right.len() > 1 {
            return Err(Fallback);
        }
        let right: Vec<V> = right.into_iter().collect();
        let mut pairs = Vec::with_capacity(left.len().max(right.len()));
        for a in left {
            for b in &right {
                pairs.push((a.clone(), b.clone()));
            }
        }
        Ok(pairs)
    }

    fn text(&mut self, pieces: &[Piece], input: &V) -> Result<Outs> {
        let mut parts = Vec::with_capacity(pieces.len());
        for piece in pieces {
            parts.push(match piece {
                Piece::Text(t) => Outs::One(V::Str(t.clone())),
                Piece::Op(op) => self.run(op, input)?,
            });
        }
        let texts = product(parts)?;
        let mut outs = Outs::Zero;
        for values in texts {
            let mut s = String::new();
            for v in values {
                s.push_str(&v.to_text()?);
            }
            outs.push(V::Str(Rc::from(s)));
        }
        Ok(outs)
    }

    fn object(&mut self, entries: &[(Op, Op)], input: &V) -> Result<Outs> {
        let mut parts = Vec::with_capacity(entries.len() * 2);
        for (k, v) in entries {
            parts.push(self.run(k, input)?);
            parts.push(self.run(v, input)?);
        }
        let mut outs = Outs::Zero;
        for values in product(parts)? {
            let mut object = V::Obj(Rc::default());
            for pair in values.chunks(2) {
                let V::Str(name) = &pair[0] else {
                    return Err(Fallback);
                };
                object = object.with_field(name, pair[1].clone())?;
            }
            outs.push(object);
        }
        Ok(outs)
    }

    fn branch(&mut self, branches: &[(Op, Op)], otherwise: Option<&Op>, input: &V) -> Result<Outs> {
        let Some(((cond, then), rest)) = branches.split_first() else {
            return match otherwise {
                Some(op) => self.run(op, input),
                None => Ok(Outs::One(input.clone())),
            };
        };
        let mut outs = Outs::Zero;
        for c in self.run(cond, input)? {
            outs.extend(if c.truthy() {
                self.run(then, input)?
            } else {
                self.branch(rest, otherwise, input)?
            });
        }
        Ok(outs)
    }

    fn steps(&mut self, v: V, steps: &[Step<Op>], root: &V, outs: &mut Outs) -> Result<()> {
        let Some((step, rest)) = steps.split_first() else {
            outs.push(v);
            return Ok(());
        };
        match step {
            Step::Each => {
                for item in items(&v)? {
                    self.steps(item, rest, root, outs)?;
                }
            }
            Step::Key(key) => {
                for k in self.run(key, root)? {
                    let item = match &k {
                        V::Str(name) => v.field(name)?,
                        V::Num(n) => v.item(Int::of(n)?.ok_or(Fallback)?)?,
                        _ => return Err(Fallback),
                    };
                    self.steps(item, rest, root, outs)?;
                }
            }
        }
        Ok(())
    }

    fn update(&mut self, path: &[Step<Key>], f: &Op, how: How, input: &V) -> Result<Outs> {
        if let How::Modify = how {
            let mut outs = Outs::Zero;
            let new = update(input.clone(), path, &mut |v| Ok(self.run(f, &v)?.first()))?;
            outs.push(new.ok_or(Fallback)?);
            return Ok(outs);
        }
        let mut outs = Outs::Zero;
        for x in self.run(f, input)? {
            let new = update(input.clone(), path, &mut |v| {
                Ok(Some(match how {
                    How::Assign => x.clone(),
                    How::Math(m) => math(m, v, x.clone())?,
                    How::Alt if v.truthy() => v,
                    How::Alt => x.clone(),
                    How::Modify => unreachable!("handled above"),
                }))
            })?;
            outs.push(new.ok_or(Fallback)?);
        }
        Ok(outs)
    }
}

/// Every way to take one value from each of `parts`, in order; at most one
/// of them may have more than one value (the order of a product is jaq's).
fn product(parts: Vec<Outs>) -> Result<Vec<Vec<V>>> {
    if parts.iter().filter(|p| p.len() > 1).count() > 1 {
        return Err(Fallback);
    }
    let mut all = vec![Vec::with_capacity(parts.len())];
    for part in parts {
        match part {
            Outs::Zero => return Ok(Vec::new()),
            Outs::One(v) => all.iter_mut().for_each(|a| a.push(v.clone())),
            Outs::Many(vs) => {
                let base = all.pop().unwrap_or_default();
                all = vs
                    .into_iter()
                    .map(|v| {
                        let mut a = base.clone();
                        a.push(v);
                        a
                    })
                    .collect();
            }
        }
    }
    Ok(all)
}

/// The value with `f` applied at `path` (`None`: the path's value is gone).
fn update(
    v: V,
    path: &[Step<Key>],
    f: &mut dyn FnMut(V) -> Result<Option<V>>,
) -> Result<Option<V>> {
    let Some((step, rest)) = path.split_first() else {
        return f(v);
    };
    Ok(Some(match (step, v) {
        (Step::Key(Key::Name(name)), v) => {
            let child = v.field(name)?;
            match update(child, rest, f)? {
                Some(new) => v.with_field(name, new)?,
                None => v.without_field(name)?,
            }
        }
        (Step::Key(Key::Index(i)), V::Arr(mut items)) => {
            let at = position(*i, items.len()).ok_or(Fallback)?;
            let new = update(items[at].clone(), rest, f)?.ok_or(Fallback)?;
            Rc::make_mut(&mut items)[at] = new;
            V::Arr(items)
        }
        (Step::Each, V::Arr(mut items)) => {
            for item in Rc::make_mut(&mut items) {
                *item = update(std::mem::replace(item, V::Null), rest, f)?.ok_or(Fallback)?;
            }
            V::Arr(items)
        }
        (Step::Each, V::Obj(mut fields)) => {
            for (_, value) in Rc::make_mut(&mut fields) {
                *value = update(std::mem::replace(value, V::Null), rest, f)?.ok_or(Fallback)?;
            }
            V::Obj(fields)
        }
        _ => return Err(Fallback),
    }))
}

/// The value without what `path` names; a path through something missing
/// is left to jaq.
fn delete(v: V, path: &[Key]) -> Result<V> {
    match (path, v) {
        ([], _) => Err(Fallback),
        ([Key::Name(name)], v @ V::Obj(_)) => v.without_field(name),
        ([Key::Index(i)], V::Arr(mut items)) => {
            let at = position(*i, items.len()).ok_or(Fallback)?;
            Rc::make_mut(&mut items).remove(at);
            Ok(V::Arr(items))
        }
        ([Key::Name(name), rest @ ..], v @ V::Obj(_)) => {
            let V::Obj(fields) = &v else { unreachable!() };
            let child = fields
                .iter()
                .find(|(n, _)| n == name)
                .ok_or(Fallback)?
                .1
                .clone();
            let new = delete(child, rest)?;
            v.with_field(name, new)
        }
        ([Key::Index(i), rest @ ..], V::Arr(mut items)) => {
            let at = position(*i, items.len()).ok_or(Fallback)?;
            let new = delete(items[at].clone(), rest)?;
            Rc::make_mut(&mut items)[at] = new;
            Ok(V::Arr(items))
        }
        _ => Err(Fallback),
    }
}
