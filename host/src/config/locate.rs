//! Where a setting was written: the file (a config or one it includes),
//! line and column of a problem's location, and the location in one style.
//!
//! Problems name settings by path, in either of two forms the checks
//! produce: by position (`pipelines[0].stages[1].plugin`, from the shape
//! check) or by name (`pipelines.books.stages.trim.plugin`, from the
//! structural checks). [`Sources::locate`] walks either through the TOML as
//! written, with its spans, and gives the place and the path by name, so a
//! report has one path style and a line to go to. Settings that came from
//! the environment (`WEIR__...`) or a default have no place; the path is
//! still made canonical as far as the files go.

use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::vars::MAX_INCLUDE_DEPTH;

/// A config file and those it includes, as written.
#[derive(Debug, Default)]
pub struct Sources {
    /// In the order a setting is looked for: the file that includes before
    /// its includes, and a later include before an earlier one (the order
    /// in which merging lets them win).
    files: Vec<Source>,
}

#[derive(Debug)]
struct Source {
    path: PathBuf,
    /// The file that includes this one, for the report.
    included_from: Option<PathBuf>,
    /// The text, which parses as TOML (parsed again for each lookup:
    /// a report looks up a handful of locations in a small file).
    text: String,
}

/// Where a problem's setting was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: PathBuf,
    pub included_from: Option<PathBuf>,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
}

/// A problem's location, made canonical, and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The location with entries of `connectors`, `pipelines`, `stages` and
    /// `tenants` by name where they have one.
    pub path: String,
    pub place: Option<Place>,
}

/// One step of a location.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

impl Sources {
    /// `path` and the files it includes, as far as they read as TOML.
    /// Nothing here is an error: loading the config reports what cannot be
    /// read, and a file missing here only leaves its problems without a line.
    pub fn read(path: &Path) -> Self {
        let mut sources = Self::default();
        sources.add(path, None, 0);
        sources
    }

    fn add(&mut self, path: &Path, included_from: Option<&Path>, depth: usize) {
        if depth > MAX_INCLUDE_DEPTH || self.files.iter().any(|f| f.path == path) {
            return;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let Ok(root) = DeTable::parse(&text) else {
            return;
        };
        let includes: Vec<String> = match root.get_ref().get("include") {
            Some(value) => match value.get_ref() {
                DeValue::String(one) => vec![one.to_string()],
                DeValue::Array(items) => items
                    .iter()
                    .filter_map(|item| match item.get_ref() {
                        DeValue::String(file) => Some(file.to_string()),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            },
            None => Vec::new(),
        };
        drop(root);
        self.push(path, included_from, text);
        let base = path.parent().unwrap_or(Path::new("."));
        for include in includes.iter().rev() {
            self.add(&base.join(include), Some(path), depth + 1);
        }
    }

    fn push(&mut self, path: &Path, included_from: Option<&Path>, text: String) {
        if DeTable::parse(&text).is_ok() {
            self.files.push(Source {
                path: path.to_path_buf(),
                included_from: included_from.map(Path::to_path_buf),
                text,
            });
        }
    }

    /// Where `location` was written, and the location by name.
    pub fn locate(&self, location: &str) -> Located {
        let steps = parse(location);
        let mut best: Option<(usize, Walk)> = None;
        for (at, file) in self.files.iter().enumerate() {
            let Ok(root) = DeTable::parse(&file.text) else {
                continue;
            };
            let walk = walk(&root, &steps);
            let deeper = best.as_ref().is_none_or(|(_, b)| walk.matched > b.matched);
            if deeper {
                let whole = walk.matched == steps.len();
                best = Some((at, walk));
                if whole {
                    break;
                }
            }
        }
        match best {
            Some((at, walk)) if walk.matched > 0 => {
                let file = &self.files[at];
                let (line, column) = line_and_column(&file.text, walk.offset);
                let mut path = walk.path;
                for step in &steps[walk.matched..] {
                    push_step(&mut path, step);
                }
                Located {
                    path,
                    place: Some(Place {
                        file: file.path.clone(),
                        included_from: file.included_from.clone(),
                        line,
                        column,
                    }),
                }
            }
            _ => Located {
                path: location.to_owned(),
                place: None,
            },
        }
    }
}

impl Place {
    /// `file:line:column`, and the file that includes it.
    fn show(&self) -> String {
        let mut out = format!("{}:{}:{}", self.file.display(), self.line, self.column);
        if let Some(by) = &self.included_from {
            out.push_str(&format!(" (included from {})", by.display()));
        }
        out
    }
}

/// Every problem of the config at `config`, one item each, found where it
/// was written: `file:line:column: path: message`, in the order of the files
/// and lines (problems of the whole file first), a message's later lines
/// indented under it.
pub fn report(config: &Path, sources: &Sources, problems: &super::Problems) -> String {
    // Each item with where it sorts: (file, line, column), none first.
    type Order = Option<(usize, usize, usize)>;
    let mut items: Vec<(Order, String)> = problems
        .iter()
        .map(|problem| {
            let found = (!problem.location.is_empty()).then(|| sources.locate(&problem.location));
            let order = found.as_ref().and_then(|f| {
                let place = f.place.as_ref()?;
                let file = sources.files.iter().position(|s| s.path == place.file)?;
                Some((file, place.line, place.column))
            });
            let mut head = String::new();
            if let Some(place) = found.as_ref().and_then(|f| f.place.as_ref()) {
                head.push_str(&place.show());
                head.push_str(": ");
            }
            if let Some(found) = &found {
                head.push_str(&found.path);
                head.push_str(": ");
            }
            let message = problem.message.trim_end().replace('\n', "\n      ");
            (order, format!("  - {head}{message}\n"))
        })
        .collect();
    items.sort_by_key(|(order, _)| *order);
    let n = items.len();
    let mut out = format!(
        "{}: {n} configuration error{}:\n",
        config.display(),
        if n == 1 { "" } else { "s" }
    );
    for (_, item) in items {
        out.push_str(&item);
    }
    out
}

/// How far a location was found in one file.
struct Walk {
    /// Steps found.
    matched: usize,
    /// Byte offset of the deepest setting found: its key where it has one.
    offset: usize,
    /// The steps found, by name.
    path: String,
}

fn walk(root: &Spanned<DeTable<'_>>, steps: &[Step]) -> Walk {
    let mut found = Walk {
        matched: 0,
        offset: root.span().start,
        path: String::new(),
    };
    let mut node: Option<&DeValue<'_>> = None;
    let mut table = Some(root.get_ref());
    for step in steps {
        let next = match (step, table, node) {
            (Step::Key(key), Some(t), _) => t.get_key_value(key.as_str()).map(|(k, v)| {
                push_step(&mut found.path, step);
                (k.span().start, v)
            }),
            (Step::Key(name), None, Some(DeValue::Array(items))) => items
                .iter()
                .find(|item| name_of(item.get_ref()) == Some(name))
                .map(|v| {
                    push_step(&mut found.path, step);
                    (v.span().start, v)
                }),
            (Step::Index(i), None, Some(DeValue::Array(items))) => items.get(*i).map(|v| {
                match name_of(v.get_ref()) {
                    Some(name) => push_step(&mut found.path, &Step::Key(name.to_owned())),
                    None => push_step(&mut found.path, step),
                }
                (v.span().start, v)
            }),
            _ => None,
        };
        let Some((offset, value)) = next else {
            break;
        };
        found.matched += 1;
        found.offset = offset;
        node = Some(value.get_ref());
        table = match value.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => None,
        };
    }
    found
}

/// The `name` of an entry of `connectors`, `pipelines`, `stages` or
/// `tenants`, when it is a plain name (one a path can hold unquoted).
fn name_of<'a>(value: &'a DeValue<'_>) -> Option<&'a str> {
    let DeValue::Table(table) = value else {
        return None;
    };
    match table.get("name")?.get_ref() {
        DeValue::String(name) if plain(name) => Some(name),
        _ => None,
    }
}

fn plain(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn push_step(path: &mut String, step: &Step) {
    match step {
        Step::Index(i) => path.push_str(&format!("[{i}]")),
        Step::Key(key) => {
            if !path.is_empty() {
                path.push('.');
            }
            if plain(key) {
                path.push_str(key);
            } else {
                path.push_str(&format!("{key:?}"));
            }
        }
    }
}

/// The steps of a location: `a.b[2]."c.d"` is `a`, `b`, 2, `c.d`.
fn parse(location: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut chars = location.chars().peekable();
    let mut key = String::new();
    let flush = |key: &mut String, steps: &mut Vec<Step>| {
        if !key.is_empty() {
            steps.push(Step::Key(std::mem::take(key)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '.' => flush(&mut key, &mut steps),
            '[' => {
                flush(&mut key, &mut steps);
                let digits: String = chars.by_ref().take_while(|&c| c != ']').collect();
                match digits.parse() {
                    Ok(i) => steps.push(Step::Index(i)),
                    Err(_) => steps.push(Step::Key(digits)),
                }
            }
            '"' => {
                let mut quoted = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => quoted.extend(chars.next()),
                        '"' => break,
                        c => quoted.push(c),
                    }
                }
                steps.push(Step::Key(quoted));
            }
            c => key.push(c),
        }
    }
    flush(&mut key, &mut steps);
    steps
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests;
