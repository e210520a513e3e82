//! Every shape problem in a config at once: unknown keys, values of the
//! wrong type, bad enum names, each with its path (`pipelines[0].stages[1].plugin.limts`).
//!
//! serde stops at the first problem, so after one is found its key is taken
//! out and the rest deserialized again, until nothing is left to report.
//! Connectors, pipelines, their stages and tenants are checked one by one:
//! a required key taken out (say a stage's `name` given as a number) then
//! hides nothing in its neighbours. What kind each problem is comes from
//! the typed error of `value.rs`, never from its message.

use serde::de::DeserializeOwned;

use super::{ConnectorConfig, PipelineConfig, Problem, StageConfig, TenantConfig};
use value::{Kind, Value, one_of};

mod value;

/// More than any real config has; a bound on the retries.
const MAX_PROBLEMS: usize = 100;

/// The shape problems in a whole config table, section by section (in key
/// order within each), and the table with what holds them taken out: every
/// unknown key and wrongly typed value, and each connector, pipeline, stage
/// or tenant that still cannot be read without it. The rest of a config is
/// checked on that table, so one pass reports everything.
pub(super) fn repair(table: &toml::Table) -> (Vec<Problem>, toml::Table) {
    let mut errors = Vec::new();
    let mut top = table.clone();
    // Arrays of entries are checked entry by entry; the top level without them.
    let entries = |key: &str, top: &mut toml::Table| -> Option<Vec<(String, toml::Value)>> {
        match top.get_mut(key) {
            Some(toml::Value::Array(items)) => Some(
                std::mem::take(items)
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| (format!("{key}[{i}]"), item))
                    .collect(),
            ),
            _ => None,
        }
    };
    let connectors = entries("connectors", &mut top);
    let pipelines = entries("pipelines", &mut top);
    let tenants = entries("tenants", &mut top);
    let top = check::<super::Config>(toml::Value::Table(top), "", &mut errors);
    let mut repaired = match top {
        Some(toml::Value::Table(top)) => top,
        _ => toml::Table::new(),
    };
    let mut keep = |key: &str, entries: Vec<toml::Value>| {
        repaired.insert(key.to_owned(), toml::Value::Array(entries));
    };
    if let Some(connectors) = connectors {
        let checked = connectors
            .into_iter()
            .filter_map(|(path, entry)| check::<ConnectorConfig>(entry, &path, &mut errors));
        keep("connectors", checked.collect());
    }
    if let Some(pipelines) = pipelines {
        let mut kept = Vec::new();
        for (path, mut entry) in pipelines {
            let mut stages_kept = None;
            if let Some(toml::Value::Array(stages)) =
                entry.as_table_mut().and_then(|t| t.get_mut("stages"))
            {
                let checked =
                    std::mem::take(stages)
                        .into_iter()
                        .enumerate()
                        .filter_map(|(i, stage)| {
                            check::<StageConfig>(stage, &format!("{path}.stages[{i}]"), &mut errors)
                        });
                stages_kept = Some(checked.collect());
            }
            if let Some(mut entry) = check::<PipelineConfig>(entry, &path, &mut errors) {
                if let (Some(stages), Some(table)) = (stages_kept, entry.as_table_mut()) {
                    table.insert("stages".into(), toml::Value::Array(stages));
                }
                kept.push(entry);
            }
        }
        keep("pipelines", kept);
    }
    if let Some(tenants) = tenants {
        let checked = tenants
            .into_iter()
            .filter_map(|(path, entry)| check::<TenantConfig>(entry, &path, &mut errors));
        keep("tenants", checked.collect());
    }
    errors.dedup();
    (errors, repaired)
}

/// Every shape problem of `value` read as a `T` (at locations under
/// `base`), and what is left of it without them, when that reads as a `T`:
/// for other TOML files checked the same way (pipeline cases).
pub(crate) fn check_as<T: DeserializeOwned>(
    value: toml::Value,
    base: &str,
) -> (Vec<Problem>, Option<toml::Value>) {
    let mut errors = Vec::new();
    let left = check::<T>(value, base, &mut errors);
    (errors, left)
}

/// Deserialize `value` as `T` again and again, taking out each problem
/// found; what is left, when it reads as a `T`.
fn check<T: DeserializeOwned>(
    mut value: toml::Value,
    base: &str,
    errors: &mut Vec<Problem>,
) -> Option<toml::Value> {
    // What was taken out for its type or shape: a key it leaves missing is
    // already reported.
    let mut removed: Vec<Vec<Step>> = Vec::new();
    for _ in 0..MAX_PROBLEMS {
        let Err(e) = serde_path_to_error::deserialize::<_, T>(Value(value.clone())) else {
            return Some(value);
        };
        let at = steps(e.path());
        let problem = match &e.inner().kind {
            Kind::UnknownKey { key, expected } => {
                // The path already ends with the unknown key.
                errors.push(Problem::new(
                    location(base, &at),
                    format!("unknown key `{key}`{}", help(expected)),
                ));
                if !remove(&mut value, &at) {
                    return None;
                }
                continue;
            }
            Kind::MissingKey(key) => {
                let mut missing = at.clone();
                missing.push(Step::Key((*key).to_owned()));
                (!removed.contains(&missing)).then(|| format!("missing key `{key}`"))
            }
            Kind::Other => Some(e.inner().message.trim().to_owned()),
        };
        if let Some(problem) = problem {
            errors.push(Problem::new(location(base, &at), problem));
        }
        // Take out what holds the problem (a missing key's table, a bad
        // value), and with it any array it is an item of: indices stay as
        // written. Nothing left to take out: this unit is done.
        let mut owner = at;
        while matches!(owner.last(), Some(Step::Index(_))) {
            owner.pop();
        }
        if owner.is_empty() || !remove(&mut value, &owner) {
            return None;
        }
        removed.push(owner);
    }
    None
}

/// One step of a path into a config: a key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The steps of a path serde reports, taken from its segments (a key may
/// hold dots or brackets, so its text is no guide).
fn steps(path: &serde_path_to_error::Path) -> Vec<Step> {
    path.iter()
        .filter_map(|segment| match segment {
            serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => {
                None
            }
        })
        .collect()
}

/// `base` and `steps` as a location: `pipelines[0].stages[1].plugin`, a key
/// that needs it quoted (`grants.env."A.B"`).
fn location(base: &str, steps: &[Step]) -> String {
    let mut out = base.to_owned();
    for step in steps {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let plain = !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if plain {
                    out.push_str(key);
                } else {
                    out.push_str(&format!("{key:?}"));
                }
            }
        }
    }
    out
}

/// " (expected one of ...)" for an unknown key of a table with `expected`
/// keys, as help; nothing when it has none.
fn help(expected: &[&str]) -> String {
    if expected.is_empty() {
        String::new()
    } else {
        format!(" (expected {})", one_of(expected))
    }
}

/// Take out the value at `steps` (its last step a key); whether it was there.
fn remove(value: &mut toml::Value, steps: &[Step]) -> bool {
    let Some((Step::Key(last), parents)) = steps.split_last() else {
        return false;
    };
    let mut at = value;
    for step in parents {
        let next = match (step, at) {
            (Step::Key(k), toml::Value::Table(t)) => t.get_mut(k),
            (Step::Index(i), toml::Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    match at {
        toml::Value::Table(t) => t.remove(last).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `found` holds exactly the problems `want` begins, in any order.
    fn assert_found(found: &[String], want: &[&str]) {
        for w in want {
            assert!(
                found.iter().any(|f| f.starts_with(w)),
                "{w:?} not in {found:#?}"
            );
        }
        assert_eq!(found.len(), want.len(), "{found:#?}");
    }

    fn problems_in(text: &str) -> Vec<String> {
        repair(&text.parse().expect("toml"))
            .0
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
        assert_found(&found, &want);
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
    fn a_missing_key_hides_nothing_after_it() {
        let found = problems_in(
            r#"
            [indexer]
            plugin = "i.wasm"
            [worker]
            threads = "four"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = "c.wasm", grants = { dirs = [{ host = "d" }] }, limits = { fuel = 1 } }
            "#,
        );
        assert_found(
            &found,
            &[
                "indexer.plugin: invalid type: string \"i.wasm\"",
                "worker.threads: invalid type: string \"four\"",
                "connectors[0].plugin.grants.dirs[0]: missing key `guest`",
                "connectors[0].plugin.limits.fuel: unknown key `fuel`",
            ],
        );
    }

    #[test]
    fn keys_with_dots_and_brackets_are_found_and_quoted() {
        let found = problems_in(
            r#"
            "a[0]]" = 1
            "b.c" = 2
            [worker]
            threads = "x"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = "c.wasm", grants = { env = { "A.B" = 5 } }, instance = "never" }
            "#,
        );
        assert_found(
            &found,
            &[
                "\"a[0]]\": unknown key",
                "\"b.c\": unknown key",
                "worker.threads: invalid type",
                "connectors[0].plugin.grants.env.\"A.B\": invalid type: integer `5`",
                "connectors[0].plugin.instance: unknown variant `never`",
            ],
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
