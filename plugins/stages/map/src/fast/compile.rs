//! jq's parsed program (jaq's syntax tree) made into the fast engine's
//! operations, when every part of it is one the engine has: else `None`, and
//! the program runs in jaq alone.

use std::rc::Rc;

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Pattern, Term};
use jaq_core::ops::{Cmp, Math};
use jaq_core::path::{Opt, Part};

use super::value::{Int, V};

/// One step of a program.
pub enum Op {
    Id,
    Lit(V),
    /// A string with `\(...)` in it.
    Text(Vec<Piece>),
    /// `[f]`
    Collect(Option<Box<Op>>),
    /// `{k: v, ...}`
    Object(Vec<(Op, Op)>),
    Neg(Box<Op>),
    Pipe(Box<Op>, Box<Op>),
    /// `f as $x | g`
    Bind(Box<Op>, Box<Op>),
    /// A variable, by how many bindings lie between it and its use.
    Var(usize),
    Comma(Box<Op>, Box<Op>),
    /// `f // g`
    Alt(Box<Op>, Box<Op>),
    And(Box<Op>, Box<Op>),
    Or(Box<Op>, Box<Op>),
    Math(Math, Box<Op>, Box<Op>),
    Cmp(Cmp, Box<Op>, Box<Op>),
    /// `if c then t elif ... else e end` (no `else`: `.`).
    If(Vec<(Op, Op)>, Option<Box<Op>>),
    /// `f.a[0][]`: the keys are computed from the input of the whole term.
    Path(Box<Op>, Vec<Step<Op>>),
    /// `p |= f`, `p = f`, `p += f`, `p //= f`, ...
    Update(Vec<Step<Key>>, Box<Op>, How),
    /// `del(p, ...)`
    Delete(Vec<Vec<Key>>),
    Empty,
    Call0(Fn0),
    Call1(Fn1, Box<Op>),
}

pub enum Piece {
    Text(Rc<str>),
    Op(Op),
}

/// One step of a path: a key (a name, an index) or every item.
pub enum Step<K> {
    Key(K),
    Each,
}

/// A key written in the program.
#[derive(Clone)]
pub enum Key {
    Name(Rc<str>),
    Index(i64),
}

#[derive(Clone, Copy)]
pub enum How {
    /// `|=`: the filter runs on the value at the path.
    Modify,
    /// `=`: the filter runs on the input; its value is put at the path.
    Assign,
    /// `+=`, ...: the value at the path, combined with the filter's.
    Math(Math),
    /// `//=`
    Alt,
}

/// Built-in filters of no arguments the engine has.
#[derive(Clone, Copy)]
pub enum Fn0 {
    Trim,
    Ltrim,
    Rtrim,
    Downcase,
    Upcase,
    Length,
    ToString,
    ToNumber,
    Not,
    Type,
    /// `values`, `strings`, ...: the input if it is of this kind.
    OfKind(&'static str),
    NotNull,
    First,
    Last,
    Add,
    Keys,
}

/// Built-in filters of one argument.
#[derive(Clone, Copy)]
pub enum Fn1 {
    Split,
    Join,
    LtrimStr,
    RtrimStr,
    StartsWith,
    EndsWith,
    Has,
    Select,
}

/// `term` as operations, with `vars` the variables bound around it
/// (innermost last), or `None` where it leaves the engine's language.
pub fn compile(term: &Term<&str>, vars: &mut Vec<String>) -> Option<Op> {
    let boxed = |t: &Term<&str>, vars: &mut Vec<String>| compile(t, vars).map(Box::new);
    Some(match term {
        Term::Id => Op::Id,
        Term::Num(n) => Op::Lit(number(n)?),
        Term::Str(None, parts) => text(parts, vars)?,
        Term::Arr(inner) => Op::Collect(match inner {
            Some(inner) => Some(boxed(inner, vars)?),
            None => None,
        }),
        Term::Obj(entries) => Op::Object(
            entries
                .iter()
                .map(|(k, v)| entry(k, v.as_ref(), vars))
                .collect::<Option<_>>()?,
        ),
        Term::Neg(t) => Op::Neg(boxed(t, vars)?),
        Term::BinOp(l, op, r) => binary(l, op, r, vars)?,
        Term::IfThenElse(branches, otherwise) => Op::If(
            branches
                .iter()
                .map(|(c, t)| Some((compile(c, vars)?, compile(t, vars)?)))
                .collect::<Option<_>>()?,
            match otherwise {
                Some(e) => Some(boxed(e, vars)?),
                None => None,
            },
        ),
        Term::Call(name, args) => call(name, args, vars)?,
        Term::Var(name) => Op::Var(depth(name, vars)?),
        Term::Path(base, path) => {
            let steps = path
                .0
                .iter()
                .map(|(part, opt)| match (part, opt) {
                    (Part::Index(i), Opt::Essential) => Some(Step::Key(compile(i, vars)?)),
                    (Part::Range(None, None), Opt::Essential) => Some(Step::Each),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            Op::Path(boxed(base, vars)?, steps)
        }
        _ => return None,
    })
}

fn binary(
    l: &Term<&str>,
    op: &BinaryOp<&str>,
    r: &Term<&str>,
    vars: &mut Vec<String>,
) -> Option<Op> {
    let both =
        |vars: &mut Vec<String>| Some((Box::new(compile(l, vars)?), Box::new(compile(r, vars)?)));
    Some(match op {
        BinaryOp::Pipe(None) => {
            let (l, r) = both(vars)?;
            Op::Pipe(l, r)
        }
        BinaryOp::Pipe(Some(Pattern::Var(name))) => {
            let l = compile(l, vars)?;
            vars.push((*name).to_owned());
            let r = compile(r, vars);
            vars.pop();
            Op::Bind(Box::new(l), Box::new(r?))
        }
        BinaryOp::Pipe(Some(_)) => return None,
        BinaryOp::Comma => both(vars).map(|(l, r)| Op::Comma(l, r))?,
        BinaryOp::Alt => both(vars).map(|(l, r)| Op::Alt(l, r))?,
        BinaryOp::And => both(vars).map(|(l, r)| Op::And(l, r))?,
        BinaryOp::Or => both(vars).map(|(l, r)| Op::Or(l, r))?,
        BinaryOp::Math(m) => both(vars).map(|(l, r)| Op::Math(*m, l, r))?,
        BinaryOp::Cmp(c) => both(vars).map(|(l, r)| Op::Cmp(*c, l, r))?,
        BinaryOp::Update => update(l, r, How::Modify, vars)?,
        BinaryOp::Assign => update(l, r, How::Assign, vars)?,
        BinaryOp::UpdateMath(m) => update(l, r, How::Math(*m), vars)?,
        BinaryOp::UpdateAlt => update(l, r, How::Alt, vars)?,
    })
}

fn update(path: &Term<&str>, f: &Term<&str>, how: How, vars: &mut Vec<String>) -> Option<Op> {
    let steps = path_of(path)?;
    Some(Op::Update(steps, Box::new(compile(f, vars)?), how))
}

/// A path written with keys alone (`.a.b[0][]`), as `|=` and `del` take.
fn path_of(term: &Term<&str>) -> Option<Vec<Step<Key>>> {
    let Term::Path(base, path) = term else {
        return None;
    };
    let Term::Id = **base else { return None };
    path.0
        .iter()
        .map(|(part, opt)| match (part, opt) {
            (Part::Index(Term::Num(n)), Opt::Essential) => {
                Some(Step::Key(Key::Index(Int::of(n).ok()??)))
            }
            (Part::Index(Term::Neg(n)), Opt::Essential) => match &**n {
                Term::Num(n) => Some(Step::Key(Key::Index(-Int::of(n).ok()??))),
                _ => None,
            },
            (Part::Index(key), Opt::Essential) => {
                Some(Step::Key(Key::Name(Rc::from(literal(key)?))))
            }
            (Part::Range(None, None), Opt::Essential) => Some(Step::Each),
            _ => None,
        })
        .collect()
}

/// The text of a string written without `\(...)` or escapes.
fn literal<'s>(term: &Term<&'s str>) -> Option<&'s str> {
    match term {
        Term::Str(None, parts) => match &parts[..] {
            [StrPart::Str(s)] => Some(s),
            [] => Some(""),
            _ => None,
        },
        _ => None,
    }
}

fn text(parts: &[StrPart<&str, Term<&str>>], vars: &mut Vec<String>) -> Option<Op> {
    let mut pieces = Vec::new();
    let mut run = String::new();
    for part in parts {
        match part {
            StrPart::Str(s) => run.push_str(s),
            StrPart::Char(c) => run.push(*c),
            StrPart::Term(t) => {
                if !run.is_empty() {
                    pieces.push(Piece::Text(Rc::from(std::mem::take(&mut run))));
                }
                pieces.push(Piece::Op(compile(t, vars)?));
            }
        }
    }
    if pieces.is_empty() {
        return Some(Op::Lit(V::Str(Rc::from(run))));
    }
    if !run.is_empty() {
        pieces.push(Piece::Text(Rc::from(run)));
    }
    Some(Op::Text(pieces))
}

fn entry(key: &Term<&str>, value: Option<&Term<&str>>, vars: &mut Vec<String>) -> Option<(Op, Op)> {
    match (key, value) {
        (key, Some(value)) => Some((compile(key, vars)?, compile(value, vars)?)),
        // `{$x}`: the key `x`, the value `$x`.
        (Term::Var(name), None) => Some((
            Op::Lit(V::str(name.strip_prefix('$')?)),
            Op::Var(depth(name, vars)?),
        )),
        // `{a}`: the key `a`, the value `.a`.
        (key, None) => {
            let name: Rc<str> = Rc::from(literal(key)?);
            Some((
                Op::Lit(V::Str(name.clone())),
                Op::Path(Box::new(Op::Id), vec![Step::Key(Op::Lit(V::Str(name)))]),
            ))
        }
    }
}

fn depth(name: &str, vars: &[String]) -> Option<usize> {
    vars.iter().rev().position(|v| v == name)
}

fn number(text: &str) -> Option<V> {
    // Read as jaq reads a number in JSON: an integer or a decimal.
    V::number(&jaq_json::read::parse_single_num(text.as_bytes())?).ok()
}

fn call(name: &str, args: &[Term<&str>], vars: &mut Vec<String>) -> Option<Op> {
    let zero = match (name, args.len()) {
        ("null", 0) => Some(Op::Lit(V::Null)),
        ("true", 0) => Some(Op::Lit(V::Bool(true))),
        ("false", 0) => Some(Op::Lit(V::Bool(false))),
        ("empty", 0) => Some(Op::Empty),
        (_, 0) => fn0(name).map(Op::Call0),
        _ => None,
    };
    if zero.is_some() {
        return zero;
    }
    let [arg] = args else { return None };
    let f = match name {
        "split" => Fn1::Split,
        "join" => Fn1::Join,
        "ltrimstr" => Fn1::LtrimStr,
        "rtrimstr" => Fn1::RtrimStr,
        "startswith" => Fn1::StartsWith,
        "endswith" => Fn1::EndsWith,
        "has" => Fn1::Has,
        "select" => Fn1::Select,
        // `[.[] | f]`
        "map" => {
            let each = Op::Path(Box::new(Op::Id), vec![Step::Each]);
            let f = compile(arg, vars)?;
            return Some(Op::Collect(Some(Box::new(Op::Pipe(
                Box::new(each),
                Box::new(f),
            )))));
        }
        "del" => {
            let paths = commas(arg)
                .into_iter()
                .map(|p| {
                    path_of(p)?
                        .into_iter()
                        .map(|s| match s {
                            Step::Key(k) => Some(k),
                            Step::Each => None,
                        })
                        .collect::<Option<Vec<Key>>>()
                })
                .collect::<Option<_>>()?;
            return Some(Op::Delete(paths));
        }
        _ => return None,
    };
    Some(Op::Call1(f, Box::new(compile(arg, vars)?)))
}

fn fn0(name: &str) -> Option<Fn0> {
    Some(match name {
        "trim" => Fn0::Trim,
        "ltrim" => Fn0::Ltrim,
        "rtrim" => Fn0::Rtrim,
        "ascii_downcase" => Fn0::Downcase,
        "ascii_upcase" => Fn0::Upcase,
        "length" => Fn0::Length,
        "tostring" => Fn0::ToString,
        "tonumber" => Fn0::ToNumber,
        "not" => Fn0::Not,
        "type" => Fn0::Type,
        "values" => Fn0::NotNull,
        "nulls" => Fn0::OfKind("null"),
        "booleans" => Fn0::OfKind("boolean"),
        "numbers" => Fn0::OfKind("number"),
        "strings" => Fn0::OfKind("string"),
        "arrays" => Fn0::OfKind("array"),
        "objects" => Fn0::OfKind("object"),
        "first" => Fn0::First,
        "last" => Fn0::Last,
        "add" => Fn0::Add,
        "keys" => Fn0::Keys,
        _ => return None,
    })
}

/// `a, b, c` as its parts.
fn commas<'t, 's>(term: &'t Term<&'s str>) -> Vec<&'t Term<&'s str>> {
    match term {
        Term::BinOp(l, BinaryOp::Comma, r) => {
            let mut all = commas(l);
            all.extend(commas(r));
            all
        }
        t => vec![t],
    }
}
