//! Every shape problem in a config at once: unknown keys, values of the
//! wrong type, bad enum names, each with its path (`pipelines[0].stages[1].plugin.limts`).
//!
//! serde stops at the first problem, so after one is found its key is taken
//! out and the rest deserialized again, until nothing is left to report.
//! Connectors, pipelines, their stages and tenants are checked one by one:
//! a required key taken out (say a stage's `name` given as a number) then
//! hides nothing in its neighbours.

use serde::de::DeserializeOwned;

use super::{ConfigError, ConnectorConfig, PipelineConfig, StageConfig, TenantConfig, error};

/// More than any real config has; a bound on the retries.
const MAX_PROBLEMS: usize = 100;

/// The shape problems in a whole config table, in the order of the file.
pub(super) fn problems(table: &toml::Table) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let mut top = table.clone();
    // Arrays of entries are checked entry by entry; the top level without them.
    let entries = |key: &str, top: &mut toml::Table| -> Vec<(String, toml::Value)> {
        match top.get_mut(key) {
            Some(toml::Value::Array(items)) => std::mem::take(items)
                .into_iter()
                .enumerate()
                .map(|(i, item)| (format!("{key}[{i}]"), item))
                .collect(),
            _ => Vec::new(),
        }
    };
    let connectors = entries("connectors", &mut top);
    let pipelines = entries("pipelines", &mut top);
    let tenants = entries("tenants", &mut top);
    check::<super::Config>(toml::Value::Table(top), "", &mut errors);
    for (path, entry) in connectors {
        check::<ConnectorConfig>(entry, &path, &mut errors);
    }
    for (path, mut entry) in pipelines {
        if let Some(toml::Value::Array(stages)) =
            entry.as_table_mut().and_then(|t| t.get_mut("stages"))
        {
            for (i, stage) in std::mem::take(stages).into_iter().enumerate() {
                check::<StageConfig>(stage, &format!("{path}.stages[{i}]"), &mut errors);
            }
        }
        check::<PipelineConfig>(entry, &path, &mut errors);
    }
    for (path, entry) in tenants {
        check::<TenantConfig>(entry, &path, &mut errors);
    }
    errors.dedup();
    errors
}

/// Deserialize `value` as `T` again and again, taking out each problem found.
fn check<T: DeserializeOwned>(mut value: toml::Value, base: &str, errors: &mut Vec<ConfigError>) {
    let mut removed: Vec<String> = Vec::new();
    for _ in 0..MAX_PROBLEMS {
        let Err(e) = serde_path_to_error::deserialize::<_, T>(value.clone()) else {
            return;
        };
        let at = e.path().to_string();
        let at = if at == "." { String::new() } else { at };
        let message = e.inner().message().trim().to_owned();
        if let Some(key) = quoted(&message, "unknown field `") {
            // The path already ends with the unknown key.
            errors.push(error(
                join(base, &at),
                format!("unknown key `{key}`{}", expected(&message)),
            ));
            if !remove(&mut value, &at) {
                return;
            }
            continue;
        }
        if let Some(key) = quoted(&message, "missing field `") {
            // Taken out here for its type: already reported.
            if !removed.contains(&join(&at, key)) {
                errors.push(error(join(base, &at), format!("missing key `{key}`")));
            }
            return;
        }
        errors.push(error(join(base, &at), message));
        // A bad item of an array goes with its array: indices stay as written.
        let owner = at.rfind('[').map_or(at.as_str(), |i| &at[..i]).to_owned();
        if owner.is_empty() || !remove(&mut value, &owner) {
            return;
        }
        removed.push(owner);
    }
}

/// The name in `message` after `prefix`, up to its closing backtick.
fn quoted<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.find('`').map(|end| &rest[..end])
}

/// ", expected one of ..." from serde's unknown-field message, as help.
fn expected(message: &str) -> String {
    message
        .find("`, expected ")
        .map(|i| format!(" ({})", &message[i + 3..]))
        .unwrap_or_default()
}

fn join(base: &str, key: &str) -> String {
    match (base.is_empty(), key.is_empty() || key.starts_with('[')) {
        (true, _) => key.to_owned(),
        (false, true) => format!("{base}{key}"),
        (false, false) => format!("{base}.{key}"),
    }
}

/// Take out the value at `path` (dotted keys, `[i]` indices); whether it was there.
fn remove(value: &mut toml::Value, path: &str) -> bool {
    let mut steps: Vec<Step> = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !key.is_empty() {
            steps.push(Step::Key(key));
        }
        while let Some(close) = rest.find(']') {
            match rest[1..close].parse() {
                Ok(i) => steps.push(Step::Index(i)),
                Err(_) => return false,
            }
            rest = &rest[close + 1..];
        }
    }
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let mut at = value;
    for step in parents {
        let next = match (step, at) {
            (Step::Key(k), toml::Value::Table(t)) => t.get_mut(*k),
            (Step::Index(i), toml::Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    match (last, at) {
        (Step::Key(k), toml::Value::Table(t)) => t.remove(*k).is_some(),
        _ => false,
    }
}

enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems_in(text: &str) -> Vec<String> {
        problems(&text.parse().expect("toml"))
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn every_unknown_key_and_wrong_type_is_listed_with_its_path() {
        let found = problems_in(
            r#"
            colour = "blue"
            [worker]
            threads = "four"
            [runner]
            stall_timeout = 12
            [[connectors]]
            name = 5
            pipeline = "p"
            plugin = { path = "c.wasm", limts = { fuel = 1 } }
            [[connectors]]
            name = "ok"
            pipeline = "p"
            plugin = { path = "c.wasm", instance = "sometimes" }
            [[pipelines]]
            name = "p"
            stages = [
                { name = "a", plugin = { path = "a.wasm", grants = { dirs = "nope" } } },
                { name = "b", plugn = { path = "b.wasm" } },
            ]
            "#,
        );
        let want = [
            "colour: unknown key `colour`",
            "worker.threads: invalid type: string \"four\", expected",
            "runner.stall_timeout: invalid type: integer `12`",
            "connectors[0].name: invalid type: integer `5`, expected a string",
            "connectors[0].plugin.limts: unknown key `limts`",
            "connectors[1].plugin.instance: unknown variant `sometimes`",
            "pipelines[0].stages[0].plugin.grants.dirs: invalid type: string \"nope\"",
            "pipelines[0].stages[1].plugn: unknown key `plugn`",
            "pipelines[0].stages[1]: missing key `plugin`",
        ];
        for w in want {
            assert!(
                found.iter().any(|f| f.starts_with(w)),
                "{w:?} not in {found:#?}"
            );
        }
        assert_eq!(found.len(), want.len(), "{found:#?}");
    }

    #[test]
    fn a_wrong_item_in_an_array_is_reported_once_at_its_index() {
        let found = problems_in(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = "c.wasm", grants = { http = ["a.example", 5, "b.example"] } }
            "#,
        );
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].starts_with("connectors[0].plugin.grants.http[1]: invalid type: integer `5`"),
            "{found:#?}"
        );
    }

    #[test]
    fn a_valid_config_has_no_problems() {
        assert_eq!(
            problems_in(
                r#"
                [[connectors]]
                name = "c"
                pipeline = "p"
                plugin = { path = "c.wasm" }
                "#
            ),
            Vec::<String>::new()
        );
    }
}
