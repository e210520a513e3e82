//! A jq program compiled once, run on one document's fields at a time.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Native, Vars, compile::Filter, data::JustLut, unwrap_valr};
use jaq_json::{Map, Val};

use crate::fast::Fast;

type Data = JustLut<Val>;

/// Field names a program cannot set or remove (the host's), besides `id`,
/// which it may give back only as it was.
pub(crate) const HOST_FIELDS: [&str; 3] = ["run_id", "_children", "_deleted"];

/// Longest stretch of a program an error quotes.
const QUOTED: usize = 60;

pub struct Program {
    /// The program in the fast engine, when it is all in its language.
    fast: Option<Fast>,
    filter: Filter<Native<Data>>,
    /// The program, as errors quote it.
    quoted: String,
}

/// What a program made of a document.
pub enum Ends {
    /// It gave no value.
    Dropped,
    /// Each field to write (its JSON text) or remove (none), in order.
    Changed(Vec<(String, Option<String>)>),
}

impl Program {
    /// `code` compiled, or where and why it is not a program.
    pub fn compile(code: &str) -> Result<Self, String> {
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let arena = Arena::default();
        let modules = Loader::new(defs)
            .load(&arena, File { code, path: () })
            .map_err(|errors| {
                let mut why = Vec::new();
                for (_, error) in errors {
                    match error {
                        jaq_core::load::Error::Io(items) => {
                            why.extend(items.into_iter().map(|(_, e)| e));
                        }
                        jaq_core::load::Error::Lex(items) => {
                            why.extend(items.into_iter().map(|(expect, at)| {
                                at_(code, at, &format!("expected {}", expect.as_str()))
                            }))
                        }
                        jaq_core::load::Error::Parse(items) => {
                            why.extend(items.into_iter().map(|(expect, at)| {
                                at_(code, at, &format!("expected {}", expect.as_str()))
                            }))
                        }
                    }
                }
                why.join("; ")
            })?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errors| {
                let why: Vec<String> = errors
                    .into_iter()
                    .flat_map(|(_, undefined)| undefined)
                    .map(|(name, kind)| at_(code, name, &format!("no {} `{name}`", kind.as_str())))
                    .collect();
                why.join("; ")
            })?;
        let fast = Fast::compile(code);
        let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
        let quoted = match code.char_indices().nth(QUOTED) {
            Some((end, _)) => format!("{}...", &code[..end]),
            None => code,
        };
        Ok(Self {
            fast,
            filter,
            quoted,
        })
    }

    /// Run the program on a document of `fields` (name, JSON text) and
    /// `id` (when given): what becomes of it, or why it fails.
    pub fn run<'f>(
        &self,
        id: Option<&str>,
        fields: impl Iterator<Item = (&'f str, &'f str)> + Clone,
    ) -> Result<Ends, String> {
        if let Some(fast) = &self.fast
            && let Ok(ends) = fast.run(id, fields.clone())
        {
            return Ok(ends.map_or(Ends::Dropped, Ends::Changed));
        }
        self.run_in_jaq(id, fields)
    }

    /// The fields the program touches the document through, when the fast
    /// engine takes it on and it touches the document only through fields
    /// it names: reading just those changes nothing of what it makes.
    pub fn fields_used(&self) -> Option<Vec<String>> {
        self.fast.as_ref().and_then(Fast::fields_used)
    }

    /// Whether the fast engine takes the program on (else jaq runs it).
    #[cfg(test)]
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    /// Whether the fast engine gave the answer for this document itself.
    #[cfg(test)]
    pub fn ran_fast<'f>(
        &self,
        id: Option<&str>,
        fields: impl Iterator<Item = (&'f str, &'f str)>,
    ) -> bool {
        self.fast
            .as_ref()
            .is_some_and(|f| f.run(id, fields).is_ok())
    }

    /// The program run by jaq alone.
    pub fn run_in_jaq<'f>(
        &self,
        id: Option<&str>,
        fields: impl Iterator<Item = (&'f str, &'f str)>,
    ) -> Result<Ends, String> {
        let mut object = Map::default();
        if let Some(id) = id {
            object.insert(text("id"), text(id));
        }
        for (name, json) in fields {
            let value = jaq_json::read::parse_single(json.as_bytes())
                .map_err(|e| format!("`{name}` is not JSON to jq: {e}"))?;
            object.insert(text(name), value);
        }
        let input = Val::obj(object.clone());
        let ctx = Ctx::<Data>::new(&self.filter.lut, Vars::new([]));
        let mut outputs = self.filter.id.run((ctx, input)).map(unwrap_valr);
        let first = match outputs.next() {
            None => return Ok(Ends::Dropped),
            Some(Err(e)) => return Err(format!("jq: {e} (in `{}`)", self.quoted)),
            Some(Ok(value)) => value,
        };
        if outputs.next().is_some() {
            return Err(
                "jq: the program gave more than one value for the document (give one object; `[...]` collects many)"
                    .into(),
            );
        }
        let Val::Obj(after) = first else {
            return Err(format!(
                "jq: the program gave {} for the document, not an object of its fields",
                shown(&first)
            ));
        };
        changes(id, &object, &after).map(Ends::Changed)
    }
}

/// What differs between the fields `before` and `after`: set, then removed.
fn changes(
    id: Option<&str>,
    before: &Map<Val, Val>,
    after: &Map<Val, Val>,
) -> Result<Vec<(String, Option<String>)>, String> {
    let mut changed = Vec::new();
    for (key, value) in after {
        let Val::TStr(name) = key else {
            return Err(format!("jq: a field name must be text, not {}", shown(key)));
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if name == "id" {
            if id.is_some_and(|id| *value == text(id)) {
                continue;
            }
            return Err("jq: a program cannot change `id` (it is the document's key)".into());
        }
        if HOST_FIELDS.contains(&name.as_str()) {
            return Err(format!(
                "jq: `{name}` is the host's: a program cannot set it"
            ));
        }
        if before.get(key) != Some(value) {
            if let Some(bad) = key_not_text(value) {
                return Err(format!(
                    "jq: `{name}` would hold an object with the key {}: JSON keys are text (`tostring` makes one)",
                    shown(bad)
                ));
            }
            changed.push((name, Some(value.to_string())));
        }
    }
    for key in before.keys() {
        if !after.contains_key(key)
            && let Val::TStr(name) = key
        {
            let name = String::from_utf8_lossy(name).into_owned();
            if name == "id" {
                return Err("jq: a program cannot remove `id` (it is the document's key)".into());
            }
            changed.push((name, None));
        }
    }
    Ok(changed)
}

/// An object key in `value` that is not text (jaq allows them; JSON does
/// not), if any.
fn key_not_text(value: &Val) -> Option<&Val> {
    match value {
        Val::Arr(items) => items.iter().find_map(key_not_text),
        Val::Obj(fields) => fields.iter().find_map(|(k, v)| match k {
            Val::TStr(_) => key_not_text(v),
            k => Some(k),
        }),
        _ => None,
    }
}

fn text(s: &str) -> Val {
    Val::from(s.to_owned())
}

/// A value, as an error shows it: cut short when long.
fn shown(value: &Val) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTED) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

/// `why`, at the line and column of `at` (a slice of `code`), quoting it.
fn at_(code: &str, at: &str, why: &str) -> String {
    let offset = (at.as_ptr() as usize)
        .checked_sub(code.as_ptr() as usize)
        .filter(|o| *o <= code.len())
        .unwrap_or(code.len());
    let before = &code[..code.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    let near: String = code[before.len()..].chars().take(20).collect();
    if near.trim().is_empty() {
        format!("line {line}, column {column} (at the end): {why}")
    } else {
        format!(
            "line {line}, column {column} (at `{}`): {why}",
            near.trim_end()
        )
    }
}
