//! The fast engine's values: JSON, with shared strings, arrays and objects
//! (a copy is a count), and numbers kept as written.

use std::cmp::Ordering;
use std::fmt::Write;
use std::rc::Rc;

/// Where the fast engine stops and leaves the document to jaq: a value or an
/// operation it does not take on (a jq error among them, whose words are
/// jaq's to give).
#[derive(Debug)]
pub struct Fallback;

pub type Result<T> = std::result::Result<T, Fallback>;

#[derive(Clone, Debug)]
pub enum V {
    Null,
    Bool(bool),
    /// A number as JSON wrote it: jaq keeps such text too, and prints it
    /// back unchanged.
    Num(Rc<str>),
    Str(Rc<str>),
    Arr(Rc<Vec<V>>),
    /// Fields in order; a document's names are unique, and a program can
    /// touch only as many as it names, so a search is short.
    Obj(Rc<Vec<(Rc<str>, V)>>),
}

impl V {
    pub fn str(s: &str) -> Self {
        Self::Str(Rc::from(s))
    }

    pub fn int(i: i64) -> Self {
        Self::Num(Rc::from(i.to_string()))
    }

    /// `json` (as the host writes it) read, or `Fallback` if it is not
    /// JSON.
    pub fn parse(json: &str) -> Result<Self> {
        // Fields are mostly text without escapes: one copy, no tree.
        if let Some(inner) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
            && !inner.contains('\\')
        {
            return Ok(Self::str(inner));
        }
        // Else read as jaq reads it, for its numbers' text.
        let value = jaq_json::read::parse_single(json.as_bytes()).map_err(|_| Fallback)?;
        Self::from_jaq(&value)
    }

    fn from_jaq(value: &jaq_json::Val) -> Result<Self> {
        use jaq_json::Val as J;
        let text = |bytes: &[u8]| {
            std::str::from_utf8(bytes)
                .map(Rc::from)
                .map_err(|_| Fallback)
        };
        Ok(match value {
            J::Null => Self::Null,
            J::Bool(b) => Self::Bool(*b),
            J::Num(n) => Self::number(n)?,
            J::TStr(s) => Self::Str(text(s)?),
            J::BStr(_) => return Err(Fallback),
            J::Arr(items) => Self::Arr(Rc::new(
                items.iter().map(Self::from_jaq).collect::<Result<_>>()?,
            )),
            J::Obj(fields) => Self::Obj(Rc::new(
                fields
                    .iter()
                    .map(|(k, v)| match k {
                        J::TStr(name) => Ok((text(name)?, Self::from_jaq(v)?)),
                        _ => Err(Fallback),
                    })
                    .collect::<Result<_>>()?,
            )),
        })
    }

    /// A number jaq read, as jaq writes it (a float is left to jaq).
    pub fn number(n: &jaq_json::Num) -> Result<Self> {
        match n {
            jaq_json::Num::Float(_) => Err(Fallback),
            n => Ok(Self::Num(Rc::from(n.to_string()))),
        }
    }

    /// The value as JSON text.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        match self {
            Self::Null => out.push_str("null"),
            Self::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Self::Num(n) => out.push_str(n),
            Self::Str(s) => write_str(s, out),
            Self::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            Self::Obj(fields) => {
                out.push('{');
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(name, out);
                    out.push(':');
                    value.write_json(out);
                }
                out.push('}');
            }
        }
    }

    /// jq's truth: all but `false` and `null`.
    pub fn truthy(&self) -> bool {
        !matches!(self, Self::Null | Self::Bool(false))
    }

    /// The value as jq's `tostring` and string interpolation write it, where
    /// jaq's text is certain: text as it is, and scalars.
    pub fn to_text(&self) -> Result<Rc<str>> {
        Ok(match self {
            Self::Str(s) => s.clone(),
            Self::Null => Rc::from("null"),
            Self::Bool(b) => Rc::from(if *b { "true" } else { "false" }),
            Self::Num(n) => match Int::of(n)? {
                Some(i) => Rc::from(i.to_string()),
                // A decimal, kept as written.
                None => n.clone(),
            },
            Self::Arr(_) | Self::Obj(_) => return Err(Fallback),
        })
    }

    /// The field `name` of an object (`null` if it has none, or of `null`).
    pub fn field(&self, name: &str) -> Result<V> {
        match self {
            Self::Obj(fields) => Ok(fields
                .iter()
                .find(|(n, _)| &**n == name)
                .map_or(Self::Null, |(_, v)| v.clone())),
            Self::Null => Ok(Self::Null),
            _ => Err(Fallback),
        }
    }

    /// Item `index` of an array (from the end when negative; `null` past
    /// either end, or of `null`).
    pub fn item(&self, index: i64) -> Result<V> {
        match self {
            Self::Arr(items) => {
                Ok(position(index, items.len()).map_or(Self::Null, |i| items[i].clone()))
            }
            Self::Null => Ok(Self::Null),
            _ => Err(Fallback),
        }
    }

    /// The object's field `name` set to `value`, in place when it has one.
    pub fn with_field(self, name: &Rc<str>, value: V) -> Result<V> {
        // jaq does not make an object of `null` here (jq does).
        let Self::Obj(mut fields) = self else {
            return Err(Fallback);
        };
        let list = Rc::make_mut(&mut fields);
        match list.iter_mut().find(|(n, _)| n == name) {
            Some((_, old)) => *old = value,
            None => list.push((name.clone(), value)),
        }
        Ok(Self::Obj(fields))
    }

    pub fn without_field(self, name: &str) -> Result<V> {
        match self {
            Self::Obj(mut fields) => {
                if let Some(at) = fields.iter().position(|(n, _)| &**n == name) {
                    Rc::make_mut(&mut fields).remove(at);
                }
                Ok(Self::Obj(fields))
            }
            Self::Null => Ok(Self::Null),
            _ => Err(Fallback),
        }
    }

    /// The kind of value, as jq's `type` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "boolean",
            Self::Num(_) => "number",
            Self::Str(_) => "string",
            Self::Arr(_) => "array",
            Self::Obj(_) => "object",
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Self::Null => 0,
            Self::Bool(_) => 1,
            Self::Num(_) => 2,
            Self::Str(_) => 3,
            Self::Arr(_) => 4,
            Self::Obj(_) => 5,
        }
    }

    /// jq's equality: numbers by value, objects whatever their order.
    pub fn same(&self, other: &V) -> Result<bool> {
        Ok(match (self, other) {
            (Self::Null, Self::Null) => true,
            (Self::Bool(a), Self::Bool(b)) => a == b,
            (Self::Num(a), Self::Num(b)) => a == b || num_cmp(a, b)? == Ordering::Equal,
            (Self::Str(a), Self::Str(b)) => a == b,
            (Self::Arr(a), Self::Arr(b)) => {
                if Rc::ptr_eq(a, b) {
                    return Ok(true);
                }
                if a.len() != b.len() {
                    return Ok(false);
                }
                for (x, y) in a.iter().zip(b.iter()) {
                    if !x.same(y)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Self::Obj(a), Self::Obj(b)) => {
                if Rc::ptr_eq(a, b) {
                    return Ok(true);
                }
                if a.len() != b.len() {
                    return Ok(false);
                }
                for (name, x) in a.iter() {
                    match b.iter().find(|(n, _)| n == name) {
                        Some((_, y)) if x.same(y)? => {}
                        _ => return Ok(false),
                    }
                }
                true
            }
            _ => false,
        })
    }

    /// jq's order: null, booleans, numbers, text, arrays, objects; within a
    /// kind by value (objects are left to jaq).
    pub fn order(&self, other: &V) -> Result<Ordering> {
        Ok(match (self, other) {
            (Self::Bool(a), Self::Bool(b)) => a.cmp(b),
            (Self::Num(a), Self::Num(b)) => num_cmp(a, b)?,
            (Self::Str(a), Self::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Self::Arr(a), Self::Arr(b)) => {
                for (x, y) in a.iter().zip(b.iter()) {
                    match x.order(y)? {
                        Ordering::Equal => {}
                        other => return Ok(other),
                    }
                }
                a.len().cmp(&b.len())
            }
            (Self::Obj(_), Self::Obj(_)) => return Err(Fallback),
            (a, b) => a.rank().cmp(&b.rank()),
        })
    }
}

/// A number's integer, when it is written as one (`None` for a decimal);
/// `Fallback` for an integer past 64 bits (jaq's big integers).
pub struct Int;

impl Int {
    pub fn of(text: &str) -> Result<Option<i64>> {
        if text.contains(['.', 'e', 'E']) {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| Fallback)
    }
}

/// Two numbers compared: as integers when both are, else as floats.
fn num_cmp(a: &str, b: &str) -> Result<Ordering> {
    if let (Some(x), Some(y)) = (Int::of(a)?, Int::of(b)?) {
        return Ok(x.cmp(&y));
    }
    let x: f64 = a.parse().map_err(|_| Fallback)?;
    let y: f64 = b.parse().map_err(|_| Fallback)?;
    x.partial_cmp(&y).ok_or(Fallback)
}

/// An index into `len` items, counting from the end when negative.
pub fn position(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let at = if index < 0 { len + index } else { index };
    (0..len).contains(&at).then_some(at as usize)
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        // An ASCII byte: `i` is a character's boundary.
        out.push_str(&s[start..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}
