//! Stage conditions: `when = { ... }` on a stage runs it only for the
//! documents the condition holds for; the others pass it untouched, to the
//! next stage.
//!
//! A condition is one test: on a field (`field = "lang"`) or a JSON path
//! (`path = "meta.lang"`), `exists`, `equals` (one value or a list) or
//! `matches` (a regular expression); or a combination, `all = [...]`,
//! `any = [...]`, `not = { ... }`. A multi-valued field passes `equals` and
//! `matches` when any of its values does; `field = "id"` tests the
//! document's id.
//!
//! Everything a config can make of a condition is bounded: how deep it
//! nests, how many tests and values it holds, how large its patterns
//! compile, so that checking a document costs at most a fixed number of
//! linear passes over it, whatever the tenant wrote.

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::document::{Document, ID_FIELD, value_as_text};
use super::problem::{Problem, Problems};

/// Deepest nesting of `all`, `any` and `not`.
pub const MAX_DEPTH: usize = 8;
/// Most tests (and combinations) in one stage's condition.
pub const MAX_TESTS: usize = 256;
/// Most values one `equals` lists.
pub const MAX_VALUES: usize = 10_000;
/// Largest a pattern may compile to, in bytes (the regex crate's size limit,
/// for the program and for its lazy DFA each).
pub const MAX_PATTERN_BYTES: usize = 1 << 20;
/// Longest field name or path a test may name.
pub const MAX_NAME_BYTES: usize = 1024;

/// `when` of a stage, as the config writes it: exactly one of the tests or
/// combinations, the test with `field` or `path`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// The field a test reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Or the JSON path (`a.b[2].c`) it reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Holds when the field has a value other than null (`true`), or has
    /// none (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    /// Holds when a value of the field equals one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Values>,
    /// Holds when a value of the field, as text, matches this regular
    /// expression somewhere (anchor it with `^...$` to match the whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// Holds when every one of these does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<Vec<Condition>>,
    /// Holds when at least one of these does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any: Option<Vec<Condition>>,
    /// Holds when this does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not: Option<Box<Condition>>,
}

/// One value or a list of them, for `equals`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Values {
    One(Scalar),
    Many(Vec<Scalar>),
}

/// A value `equals` compares with: text, a number or a boolean.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Scalar {
    Boolean(bool),
    Integer(i64),
    Float(f64),
    Text(String),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Boolean(b) => b.to_string(),
            Scalar::Integer(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Text(t) => t.clone(),
        }
    }
}

/// A condition ready to test documents with.
#[derive(Debug, Clone)]
pub enum When {
    Exists(Source, bool),
    Equals(Source, Vec<Expected>),
    Matches(Source, Regex),
    All(Vec<When>),
    Any(Vec<When>),
    Not(Box<When>),
}

/// What a test reads.
#[derive(Debug, Clone)]
pub enum Source {
    Field(String),
    Path(String),
}

/// One value of `equals`: its text, and its number when it is one, so that
/// `1`, `1.0` and `"1"` in a config all equal a document's `1.0`.
#[derive(Debug, Clone)]
pub struct Expected {
    text: String,
    number: Option<f64>,
}

impl Condition {
    /// This condition checked and made ready, or everything wrong with it:
    /// each problem's location is where in the condition (`any[1].matches`,
    /// empty for the condition itself).
    pub fn compile(&self) -> Result<When, Problems> {
        let mut problems = Vec::new();
        let mut tests = 0;
        let when = self.compiled("", 0, &mut tests, &mut problems);
        if tests > MAX_TESTS {
            problems.push(Problem::whole(format!(
                "holds {tests} tests and combinations; at most {MAX_TESTS}"
            )));
        }
        match when {
            Some(when) if problems.is_empty() => Ok(when),
            _ => Err(Problems(problems)),
        }
    }

    fn compiled(
        &self,
        at: &str,
        depth: usize,
        tests: &mut usize,
        problems: &mut Vec<Problem>,
    ) -> Option<When> {
        *tests += 1;
        let problem = |problems: &mut Vec<Problem>, key: &str, message: String| {
            let at = match (at.is_empty(), key.is_empty()) {
                (_, true) => at.to_owned(),
                (true, false) => key.to_owned(),
                (false, false) => format!("{at}.{key}"),
            };
            problems.push(Problem::new(at, message));
        };
        let given: Vec<&str> = [
            ("exists", self.exists.is_some()),
            ("equals", self.equals.is_some()),
            ("matches", self.matches.is_some()),
            ("all", self.all.is_some()),
            ("any", self.any.is_some()),
            ("not", self.not.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        let [kind] = given[..] else {
            let reads = match (&self.field, &self.path) {
                (Some(_), _) => Some("field"),
                (None, Some(_)) => Some("path"),
                (None, None) => None,
            };
            let message = if let (true, Some(reads)) = (given.is_empty(), reads) {
                format!("`{reads}` needs a test: one of `exists`, `equals`, `matches`")
            } else if given.is_empty() {
                "needs one of `exists`, `equals`, `matches` (with `field` or `path`), or `all`, `any`, `not`".to_owned()
            } else {
                format!(
                    "has {}: one test per condition; combine tests with `all = [...]` or `any = [...]`",
                    given
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            problem(problems, "", message);
            return None;
        };
        let combines = matches!(kind, "all" | "any" | "not");
        if combines {
            if self.field.is_some() || self.path.is_some() {
                problem(
                    problems,
                    "",
                    format!(
                        "`{kind}` combines conditions and reads no field: move `field` or `path` into them"
                    ),
                );
                return None;
            }
            if depth >= MAX_DEPTH {
                problem(
                    problems,
                    kind,
                    format!("nests deeper than {MAX_DEPTH} levels of `all`, `any` and `not`"),
                );
                return None;
            }
            let inner =
                |c: &Condition, key: String, tests: &mut usize, problems: &mut Vec<Problem>| {
                    let at = if at.is_empty() {
                        key
                    } else {
                        format!("{at}.{key}")
                    };
                    c.compiled(&at, depth + 1, tests, problems)
                };
            if let Some(not) = &self.not {
                return inner(not, "not".into(), tests, problems).map(|w| When::Not(Box::new(w)));
            }
            let list = self.all.as_ref().or(self.any.as_ref()).expect("all or any");
            if list.is_empty() {
                problem(problems, kind, "needs at least one condition".into());
                return None;
            }
            let mut whens = Vec::with_capacity(list.len());
            for (i, c) in list.iter().enumerate() {
                if *tests > MAX_TESTS {
                    break;
                }
                whens.push(inner(c, format!("{kind}[{i}]"), tests, problems));
            }
            let whens: Option<Vec<When>> = whens.into_iter().collect();
            return whens.map(|w| {
                if kind == "all" {
                    When::All(w)
                } else {
                    When::Any(w)
                }
            });
        }
        let source = match (&self.field, &self.path) {
            (Some(name), None) => Source::Field(name.clone()),
            (None, Some(path)) => Source::Path(path.clone()),
            (Some(_), Some(_)) => {
                problem(problems, "", "has both `field` and `path`: give one".into());
                return None;
            }
            (None, None) => {
                problem(
                    problems,
                    "",
                    format!("`{kind}` needs the `field` or `path` it tests"),
                );
                return None;
            }
        };
        let name = match &source {
            Source::Field(n) | Source::Path(n) => n,
        };
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            let key = if self.field.is_some() {
                "field"
            } else {
                "path"
            };
            problem(
                problems,
                key,
                format!("must be 1 to {MAX_NAME_BYTES} bytes long"),
            );
            return None;
        }
        if let Source::Path(path) = &source
            && let Err(e) = Document::new("").get_path(path)
        {
            problem(problems, "path", format!("is not a path: {e}"));
            return None;
        }
        match kind {
            "exists" => Some(When::Exists(source, self.exists.expect("exists"))),
            "equals" => {
                let values: Vec<&Scalar> = match self.equals.as_ref().expect("equals") {
                    Values::One(v) => vec![v],
                    Values::Many(vs) => vs.iter().collect(),
                };
                if values.is_empty() || values.len() > MAX_VALUES {
                    problem(
                        problems,
                        "equals",
                        format!("must list 1 to {MAX_VALUES} values"),
                    );
                    return None;
                }
                let expected = values
                    .into_iter()
                    .map(|v| Expected {
                        text: v.text(),
                        number: number(&v.text()),
                    })
                    .collect();
                Some(When::Equals(source, expected))
            }
            _ => {
                let pattern = self.matches.as_deref().expect("matches");
                match RegexBuilder::new(pattern)
                    .size_limit(MAX_PATTERN_BYTES)
                    .dfa_size_limit(MAX_PATTERN_BYTES)
                    .build()
                {
                    Ok(regex) => Some(When::Matches(source, regex)),
                    Err(e) => {
                        problem(
                            problems,
                            "matches",
                            format!("is not a pattern this accepts: {e}"),
                        );
                        None
                    }
                }
            }
        }
    }
}

/// `text` as a number, when it is a finite one.
fn number(text: &str) -> Option<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && !text.trim().is_empty())
}

impl When {
    /// Whether this holds for `doc`.
    pub fn holds(&self, doc: &Document) -> bool {
        match self {
            When::Exists(source, wanted) => {
                let mut found = false;
                source.each(doc, &mut |v| {
                    found = !v.is_null();
                    found
                });
                found == *wanted
            }
            When::Equals(source, expected) => {
                let mut found = false;
                source.each(doc, &mut |v| {
                    found = equals(v, expected);
                    found
                });
                found
            }
            When::Matches(source, regex) => {
                let mut found = false;
                source.each(doc, &mut |v| {
                    found = match v {
                        Value::String(s) => regex.is_match(s),
                        other => value_as_text(other).is_some_and(|t| regex.is_match(&t)),
                    };
                    found
                });
                found
            }
            When::All(whens) => whens.iter().all(|w| w.holds(doc)),
            When::Any(whens) => whens.iter().any(|w| w.holds(doc)),
            When::Not(when) => !when.holds(doc),
        }
    }
}

impl Source {
    /// Call `f` on each value this reads from `doc` (each value of an array)
    /// until it answers true.
    fn each(&self, doc: &Document, f: &mut dyn FnMut(&Value) -> bool) {
        let id;
        let whole = match self {
            Source::Field(name) if name == ID_FIELD => {
                id = Value::String(doc.id().to_owned());
                Some(&id)
            }
            Source::Field(name) => doc.fields().get(name),
            Source::Path(path) => doc.get_path(path).ok().flatten(),
        };
        match whole {
            Some(Value::Array(values)) => {
                for v in values {
                    if f(v) {
                        return;
                    }
                }
            }
            Some(v) => {
                f(v);
            }
            None => {}
        }
    }
}

/// Whether `value` equals one of `expected`: as text, or as numbers.
fn equals(value: &Value, expected: &[Expected]) -> bool {
    let (text, is_number) = match value {
        Value::Null | Value::Array(_) | Value::Object(_) => return false,
        Value::String(s) => (std::borrow::Cow::Borrowed(s.as_str()), false),
        Value::Number(n) => (std::borrow::Cow::Borrowed(n.as_str()), true),
        Value::Bool(b) => (std::borrow::Cow::Owned(b.to_string()), false),
    };
    let as_number = if is_number { number(&text) } else { None };
    expected.iter().any(|e| {
        e.text == text || (as_number.is_some() && e.number.is_some() && as_number == e.number)
    })
}

#[cfg(test)]
mod tests;
