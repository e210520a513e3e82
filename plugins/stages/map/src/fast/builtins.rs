//! The fast engine's built-in filters and operators, as jaq's behave on
//! the values the engine takes on (`Fallback` on the rest).

use std::rc::Rc;

use jaq_core::ops::{Cmp, Math};

use super::compile::{Fn0, Fn1};
use super::value::{Fallback, Int, Result, V};

/// `.[]`: an array's items, an object's values.
pub fn items(v: &V) -> Result<Vec<V>> {
    match v {
        V::Arr(items) => Ok(items.to_vec()),
        V::Obj(fields) => Ok(fields.iter().map(|(_, v)| v.clone()).collect()),
        _ => Err(Fallback),
    }
}

pub fn math(m: Math, a: V, b: V) -> Result<V> {
    Ok(match (m, a, b) {
        (Math::Add, V::Null, b) => b,
        (Math::Add, a, V::Null) => a,
        (Math::Add, V::Str(a), V::Str(b)) => V::Str(Rc::from(format!("{a}{b}"))),
        (Math::Add, V::Arr(a), V::Arr(b)) => {
            let mut all = Rc::unwrap_or_clone(a);
            all.extend(b.iter().cloned());
            V::Arr(Rc::new(all))
        }
        (Math::Add, mut a @ V::Obj(_), V::Obj(b)) => {
            for (name, value) in b.iter() {
                a = a.with_field(name, value.clone())?;
            }
            a
        }
        (Math::Div, V::Str(a), V::Str(b)) => split(&a, &b),
        (m @ (Math::Add | Math::Sub | Math::Mul), V::Num(a), V::Num(b)) => {
            let (x, y) = (Int::of(&a)?.ok_or(Fallback)?, Int::of(&b)?.ok_or(Fallback)?);
            let z = match m {
                Math::Add => x.checked_add(y),
                Math::Sub => x.checked_sub(y),
                _ => x.checked_mul(y),
            };
            V::int(z.ok_or(Fallback)?)
        }
        _ => return Err(Fallback),
    })
}

pub fn compare(c: Cmp, a: &V, b: &V) -> Result<bool> {
    use std::cmp::Ordering::{Greater, Less};
    Ok(match c {
        Cmp::Eq => a.same(b)?,
        Cmp::Ne => !a.same(b)?,
        Cmp::Lt => a.order(b)? == Less,
        Cmp::Le => a.order(b)? != Greater,
        Cmp::Gt => a.order(b)? == Greater,
        Cmp::Ge => a.order(b)? != Less,
    })
}

/// jaq's `split/1` (and `/` of two strings).
fn split(s: &str, sep: &str) -> V {
    let parts: Vec<V> = if s.is_empty() {
        Vec::new()
    } else if sep.is_empty() {
        s.char_indices()
            .map(|(i, c)| V::str(&s[i..i + c.len_utf8()]))
            .collect()
    } else {
        s.split(sep).map(V::str).collect()
    };
    V::Arr(Rc::new(parts))
}

/// A string with `cut` applied, shared when nothing was cut.
fn trimmed(v: &V, cut: fn(&str) -> &str) -> Result<V> {
    let V::Str(s) = v else { return Err(Fallback) };
    let kept = cut(s);
    Ok(if kept.len() == s.len() {
        v.clone()
    } else {
        V::str(kept)
    })
}

pub fn call0(f: Fn0, v: &V) -> Result<Option<V>> {
    let text = |v: &V| match v {
        V::Str(s) => Ok(s.clone()),
        _ => Err(Fallback),
    };
    Ok(Some(match f {
        Fn0::Trim => trimmed(v, str::trim)?,
        Fn0::Ltrim => trimmed(v, str::trim_start)?,
        Fn0::Rtrim => trimmed(v, str::trim_end)?,
        Fn0::Downcase => V::str(&text(v)?.to_ascii_lowercase()),
        Fn0::Upcase => V::str(&text(v)?.to_ascii_uppercase()),
        Fn0::Length => V::int(match v {
            V::Null => 0,
            V::Str(s) => s.chars().count() as i64,
            V::Arr(items) => items.len() as i64,
            V::Obj(fields) => fields.len() as i64,
            _ => return Err(Fallback),
        }),
        Fn0::ToString => V::Str(v.to_text()?),
        Fn0::ToNumber => match v {
            V::Num(_) => v.clone(),
            V::Str(s) if is_integer(s) => V::int(s.parse().map_err(|_| Fallback)?),
            _ => return Err(Fallback),
        },
        Fn0::Not => V::Bool(!v.truthy()),
        Fn0::Type => V::str(v.kind()),
        Fn0::OfKind(kind) if v.kind() == kind => v.clone(),
        Fn0::NotNull if !matches!(v, V::Null) => v.clone(),
        Fn0::OfKind(_) | Fn0::NotNull => return Ok(None),
        Fn0::First => v.item(0)?,
        Fn0::Last => v.item(-1)?,
        Fn0::Add => {
            let mut sum = V::Null;
            for item in items(v)? {
                sum = math(Math::Add, sum, item)?;
            }
            sum
        }
        Fn0::Keys => match v {
            V::Obj(fields) => {
                let mut names: Vec<&Rc<str>> = fields.iter().map(|(n, _)| n).collect();
                names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
                V::Arr(Rc::new(
                    names.into_iter().map(|n| V::Str(n.clone())).collect(),
                ))
            }
            V::Arr(items) => V::Arr(Rc::new((0..items.len() as i64).map(V::int).collect())),
            _ => return Err(Fallback),
        },
    }))
}

/// Text jq reads as an integer: digits, no leading zero, an optional `-`.
fn is_integer(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

pub fn call1(f: Fn1, v: &V, arg: V) -> Result<Option<V>> {
    Ok(Some(match (f, v, &arg) {
        (Fn1::Split, V::Str(s), V::Str(sep)) => split(s, sep),
        (Fn1::Join, V::Arr(items), V::Str(_) | V::Null) => {
            let sep = match &arg {
                V::Str(sep) => sep.clone(),
                _ => Rc::from(""),
            };
            let mut joined = String::new();
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    joined.push_str(&sep);
                }
                joined.push_str(&item.to_text()?);
            }
            V::Str(Rc::from(joined))
        }
        (Fn1::LtrimStr, V::Str(s), V::Str(fix)) => match s.strip_prefix(&**fix) {
            Some(rest) => V::str(rest),
            None => v.clone(),
        },
        (Fn1::RtrimStr, V::Str(s), V::Str(fix)) => match s.strip_suffix(&**fix) {
            Some(rest) => V::str(rest),
            None => v.clone(),
        },
        (Fn1::StartsWith, V::Str(s), V::Str(fix)) => V::Bool(s.starts_with(&**fix)),
        (Fn1::EndsWith, V::Str(s), V::Str(fix)) => V::Bool(s.ends_with(&**fix)),
        (Fn1::Has, V::Obj(fields), V::Str(name)) => V::Bool(fields.iter().any(|(n, _)| n == name)),
        (Fn1::Has, V::Arr(items), V::Num(n)) => match Int::of(n)? {
            Some(i) if i >= 0 => V::Bool((i as usize) < items.len()),
            _ => return Err(Fallback),
        },
        (Fn1::Select, _, c) => return Ok(c.truthy().then(|| v.clone())),
        _ => return Err(Fallback),
    }))
}
