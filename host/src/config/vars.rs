//! What makes one config serve many runs: `include`d files and `${VAR}`
//! variables, resolved on the TOML table before it is read as a [`Config`].
//!
//! - `include = ["common.toml"]` (top level, paths relative to the file that
//!   includes): each included file's table is merged under this one, in
//!   order; a key set here wins, tables merge key by key, anything else
//!   (arrays included) is replaced whole. Includes may include, up to
//!   [`MAX_INCLUDE_DEPTH`] deep, never in a cycle.
//! - `${NAME}` in any string value is the environment variable `NAME`;
//!   `${NAME:-default}` falls back to `default` when `NAME` is unset or
//!   empty; `$${` is a literal `${`. A variable that is unset with no
//!   default is an error naming the setting. Variables make strings; for
//!   numbers and booleans, use `WEIR__SECTION__KEY` overrides.
//!
//! [`Config`]: super::Config

use std::path::{Path, PathBuf};

use crate::core::problem::Problems;

/// How deep includes may nest.
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// Why the includes of a config cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum IncludeError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} includes itself: {}", path.display(), show_chain(chain))]
    Cycle { path: PathBuf, chain: Vec<PathBuf> },
    #[error("{}: includes nest more than {MAX_INCLUDE_DEPTH} deep", path.display())]
    TooDeep { path: PathBuf },
    #[error("{}: {source}", path.display())]
    Toml {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("include[{0}] must be a file name (a string)")]
    NotAFileName(usize),
}

/// `a -> b -> a`.
fn show_chain(chain: &[PathBuf]) -> String {
    chain
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// Why a `${...}` reference cannot be replaced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    #[error("`{0}`: a `${{` without its `}}`")]
    Unclosed(String),
    #[error("`${{{0}}}`: a variable name is letters, digits and `_`")]
    BadName(String),
    #[error("`${{{0}}}`: {0} is not set (give a default: `${{{0}:-value}}`)")]
    Unset(String),
}

/// `table` (from a file in `base`, or from text) with its includes merged
/// in; errors name the files.
pub(super) fn with_includes(table: toml::Table, base: &Path) -> Result<toml::Table, IncludeError> {
    resolve(table, base, &mut Vec::new())
}

/// The table of the config file `path`, its includes merged in.
pub(super) fn load_file(path: &Path) -> Result<toml::Table, IncludeError> {
    load(path, &mut Vec::new())
}

fn load(path: &Path, chain: &mut Vec<PathBuf>) -> Result<toml::Table, IncludeError> {
    let unreadable = |source| IncludeError::Read {
        path: path.to_path_buf(),
        source,
    };
    let canonical = path.canonicalize().map_err(unreadable)?;
    if chain.contains(&canonical) {
        let mut chain = chain.clone();
        chain.push(canonical);
        return Err(IncludeError::Cycle {
            path: path.to_path_buf(),
            chain,
        });
    }
    if chain.len() >= MAX_INCLUDE_DEPTH {
        return Err(IncludeError::TooDeep {
            path: path.to_path_buf(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    let table: toml::Table = text.parse().map_err(|source| IncludeError::Toml {
        path: path.to_path_buf(),
        source,
    })?;
    chain.push(canonical);
    let resolved = resolve(table, path.parent().unwrap_or(Path::new(".")), chain);
    chain.pop();
    resolved
}

fn resolve(
    mut table: toml::Table,
    base: &Path,
    chain: &mut Vec<PathBuf>,
) -> Result<toml::Table, IncludeError> {
    let Some(includes) = table.remove("include") else {
        return Ok(table);
    };
    let includes = match includes {
        toml::Value::Array(items) => items,
        other => vec![other],
    };
    let mut merged = toml::Table::new();
    for (i, include) in includes.into_iter().enumerate() {
        let toml::Value::String(file) = include else {
            return Err(IncludeError::NotAFileName(i));
        };
        merge(&mut merged, load(&base.join(&file), chain)?);
    }
    merge(&mut merged, table);
    Ok(merged)
}

/// Merge `over` into `under`: tables key by key, anything else replaced.
fn merge(under: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (under.get_mut(&key), value) {
            (Some(toml::Value::Table(below)), toml::Value::Table(above)) => merge(below, above),
            (_, value) => {
                under.insert(key, value);
            }
        }
    }
}

/// Replace `${NAME}` and `${NAME:-default}` in every string of `table` with
/// `lookup(NAME)`; every problem, with the setting's path.
pub(super) fn substitute(
    table: &mut toml::Table,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Problems {
    let mut errors = Problems::default();
    for (key, value) in table.iter_mut() {
        walk(value, key.clone(), lookup, &mut errors);
    }
    errors
}

fn walk(
    value: &mut toml::Value,
    path: String,
    lookup: &dyn Fn(&str) -> Option<String>,
    errors: &mut Problems,
) {
    match value {
        toml::Value::String(text) if text.contains('$') => match expand(text, lookup) {
            Ok(expanded) => *text = expanded,
            Err(e) => errors.at(path, e.to_string()),
        },
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(item, format!("{path}[{i}]"), lookup, errors);
            }
        }
        toml::Value::Table(table) => {
            for (key, item) in table.iter_mut() {
                walk(item, format!("{path}.{key}"), lookup, errors);
            }
        }
        _ => {}
    }
}

/// `text` with its variables replaced.
fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, VarError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        if let Some(literal) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = literal;
        } else if let Some(inner) = after.strip_prefix("${") {
            let end = inner
                .find('}')
                .ok_or_else(|| VarError::Unclosed(after.to_owned()))?;
            let reference = &inner[..end];
            let (name, default) = match reference.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (reference, None),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(VarError::BadName(reference.to_owned()));
            }
            match (lookup(name).filter(|v| !v.is_empty()), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(VarError::Unset(name.to_owned()));
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{expand, substitute, with_includes};

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("search.local".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_expand_with_defaults_and_escapes() {
        assert_eq!(
            expand("http://${HOST}:9200", &env).expect("ok"),
            "http://search.local:9200"
        );
        assert_eq!(expand("${MISSING:-out}/x", &env).expect("ok"), "out/x");
        assert_eq!(expand("${EMPTY:-fallback}", &env).expect("ok"), "fallback");
        assert_eq!(
            expand("cost $5 and $${HOST}", &env).expect("ok"),
            "cost $5 and ${HOST}"
        );
        assert!(
            expand("${MISSING}", &env)
                .expect_err("an error")
                .to_string()
                .contains("MISSING is not set")
        );
        assert!(expand("${HOST", &env).is_err());
        assert!(expand("${BAD NAME}", &env).is_err());
    }

    #[test]
    fn every_unset_variable_is_reported_with_its_setting() {
        let mut table: toml::Table = r#"
            a = "${MISSING}"
            [b]
            list = ["ok", "${ALSO_MISSING}"]
            n = 3
        "#
        .parse()
        .expect("ok");
        let errors = substitute(&mut table, &env);
        let paths: Vec<&str> = errors.iter().map(|e| e.location.as_str()).collect();
        assert_eq!(paths, ["a", "b.list[1]"]);
    }

    #[test]
    fn includes_merge_under_the_including_file_and_cycles_are_refused() {
        let dir = tempfile::tempdir().expect("ok");
        let write =
            |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("ok");
        write(
            "base.toml",
            "[worker]\nthreads = 4\nqueue = 9\n[runner]\nlog_interval = \"1s\"\n",
        );
        write(
            "main.toml",
            "include = [\"base.toml\"]\n[worker]\nthreads = 2\n",
        );
        let load = |name: &str| {
            let text = std::fs::read_to_string(dir.path().join(name)).expect("read");
            with_includes(text.parse().expect("toml"), dir.path())
        };
        let table = load("main.toml").expect("ok");
        assert_eq!(table["worker"]["threads"].as_integer(), Some(2));
        assert_eq!(table["worker"]["queue"].as_integer(), Some(9));
        assert_eq!(table["runner"]["log_interval"].as_str(), Some("1s"));
        assert!(table.get("include").is_none());
        write("a.toml", "include = \"b.toml\"\n");
        write("b.toml", "include = [\"a.toml\"]\n");
        let error = load("a.toml").expect_err("an error").to_string();
        assert!(error.contains("includes itself"), "{error}");
        write("bad.toml", "include = [3]\n");
        assert!(
            load("bad.toml")
                .expect_err("an error")
                .to_string()
                .contains("include[0]")
        );
    }
}
