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

/// How deep includes may nest.
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// `table` (from a file in `base`, or from text) with its includes merged
/// in; errors name the files.
pub(super) fn with_includes(table: toml::Table, base: &Path) -> Result<toml::Table, String> {
    resolve(table, base, &mut Vec::new())
}

/// The table of the config file `path`, its includes merged in.
pub(super) fn load_file(path: &Path) -> Result<toml::Table, String> {
    load(path, &mut Vec::new())
}

fn load(path: &Path, chain: &mut Vec<PathBuf>) -> Result<toml::Table, String> {
    let canonical = path
        .canonicalize()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if chain.contains(&canonical) {
        return Err(format!(
            "{} includes itself: {}",
            path.display(),
            chain
                .iter()
                .chain([&canonical])
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" -> ")
        ));
    }
    if chain.len() >= MAX_INCLUDE_DEPTH {
        return Err(format!(
            "{}: includes nest more than {MAX_INCLUDE_DEPTH} deep",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("{}: {e}", path.display()))?;
    chain.push(canonical);
    let resolved = resolve(table, path.parent().unwrap_or(Path::new(".")), chain);
    chain.pop();
    resolved
}

fn resolve(
    mut table: toml::Table,
    base: &Path,
    chain: &mut Vec<PathBuf>,
) -> Result<toml::Table, String> {
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
            return Err(format!("include[{i}] must be a file name (a string)"));
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
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    for (key, value) in table.iter_mut() {
        walk(value, key.clone(), lookup, &mut errors);
    }
    errors
}

fn walk(
    value: &mut toml::Value,
    path: String,
    lookup: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<(String, String)>,
) {
    match value {
        toml::Value::String(text) if text.contains('$') => match expand(text, lookup) {
            Ok(expanded) => *text = expanded,
            Err(message) => errors.push((path, message)),
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
fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
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
                .ok_or_else(|| format!("`{after}`: a `${{` without its `}}`"))?;
            let reference = &inner[..end];
            let (name, default) = match reference.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (reference, None),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "`${{{reference}}}`: a variable name is letters, digits and `_`"
                ));
            }
            match (lookup(name).filter(|v| !v.is_empty()), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(format!(
                        "`${{{name}}}`: {name} is not set (give a default: `${{{name}:-value}}`)"
                    ));
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
        let paths: Vec<&str> = errors.iter().map(|(p, _)| p.as_str()).collect();
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
        let error = load("a.toml").expect_err("an error");
        assert!(error.contains("includes itself"), "{error}");
        write("bad.toml", "include = [3]\n");
        assert!(
            load("bad.toml")
                .expect_err("an error")
                .contains("include[0]")
        );
    }
}
