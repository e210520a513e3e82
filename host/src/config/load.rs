//! Reading a config: a file or text, its includes and variables, the
//! environment's overrides, its shape, and the paths and tenant limits it
//! implies.

use std::path::{Path, PathBuf};

use super::{Config, Problem, Problems, shape, vars};

/// The prefix of environment overrides.
pub const ENV_PREFIX: &str = "WEIR__";

/// Why an environment override cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("empty key in the override name")]
    EmptyKey,
    #[error("empty override name")]
    EmptyName,
    #[error("connectors and pipelines cannot be overridden from the environment")]
    NotOverridable,
    #[error("`{0}` is not a section")]
    NotASection(String),
}

impl Config {
    /// Read `path`, apply environment overrides, and resolve relative paths
    /// against the file's directory. Checks only the file's own shape; see
    /// [`Config::check`] and the runner's validation for the rest.
    pub fn load(path: &Path) -> Result<Self, Problems> {
        let table = vars::load_file(path).map_err(|e| Problems::one(unreadable(path, e)))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut config = Self::from_table(table, base, std::env::vars())?;
        // Its own sync unless it names one: a copy of this config under
        // another name never reads or writes this one's state.
        config.state.default_id = super::state::default_state_id(path);
        Ok(config)
    }

    /// Parse TOML `text`, with its includes relative to `base`, variables
    /// and overrides from `env` (pairs such as `("WEIR__WORKER__THREADS",
    /// "8")` or `("HOST", "search.local")`), resolving paths against `base`.
    pub fn parse(
        text: &str,
        base: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Problems> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| Problems::one(Problem::whole(e.to_string())))?;
        let table = vars::with_includes(table, base)
            .map_err(|e| Problems::one(Problem::new("include", e.to_string())))?;
        Self::from_table(table, base, env)
    }

    fn from_table(
        table: toml::Table,
        base: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Problems> {
        match Self::draft_from_table(table, base, env) {
            (Some(config), problems) if problems.is_empty() => Ok(config),
            (_, problems) => Err(problems),
        }
    }

    /// Read `path` as far as it can be read: every problem of its shape,
    /// variables and overrides, and the config with the settings that hold
    /// them left out, to check the rest on (see [`Config::check`] and the
    /// runner's validation). Only a file that is not TOML, or includes that
    /// cannot be read, give no config at all.
    pub fn load_draft(path: &Path) -> Result<(Self, Problems), Problems> {
        let table = vars::load_file(path).map_err(|e| Problems::one(unreadable(path, e)))?;
        let base = path.parent().unwrap_or(Path::new("."));
        match Self::draft_from_table(table, base, std::env::vars()) {
            (Some(mut config), problems) => {
                config.state.default_id = super::state::default_state_id(path);
                Ok((config, problems))
            }
            (None, problems) => Err(problems),
        }
    }

    fn draft_from_table(
        mut table: toml::Table,
        base: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> (Option<Self>, Problems) {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let lookup = |name: &str| {
            env.iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        let mut errors = vars::substitute(&mut table, &lookup);
        for (key, value) in env {
            if let Some(path) = key.strip_prefix(ENV_PREFIX)
                && let Err(e) = apply_override(&mut table, path, &value)
            {
                errors.at(key, e.to_string());
            }
        }
        let config = match toml::Value::Table(table.clone()).try_into::<Config>() {
            Ok(config) => Some(config),
            Err(e) => {
                // serde stops at the first problem: list them all, and read
                // the rest without them.
                let (found, repaired) = shape::repair(&table);
                if found.is_empty() {
                    errors.push(Problem::whole(e.message().trim()));
                }
                errors.extend(found);
                toml::Value::Table(repaired).try_into::<Config>().ok()
            }
        };
        let config = config.map(|mut config| {
            config.resolve_paths(base);
            config.apply_tenant_limits();
            config
        });
        (config, errors)
    }

    /// Fill the limits the plugins of each tenant's pipelines leave unset
    /// from the tenant's.
    fn apply_tenant_limits(&mut self) {
        let tenants = std::mem::take(&mut self.tenants);
        for tenant in &tenants {
            let owns = |pipeline: &str| tenant.pipelines.iter().any(|p| p == pipeline);
            for (_, spec) in self.plugins_mut().filter(|(p, _)| p.is_some_and(owns)) {
                spec.limits = spec.limits.or(&tenant.limits);
            }
        }
        self.tenants = tenants;
    }

    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(dir) = &mut self.runner.cache_dir {
            resolve(dir);
        }
        resolve(&mut self.dead_letters.path);
        resolve(&mut self.trace.path);
        resolve(&mut self.state.path);
        resolve(&mut self.cache.path);
        let shadows = self.pipelines.iter_mut().flat_map(|p| &mut p.stages);
        for report in shadows.filter_map(|s| s.shadow.as_mut()?.report.as_mut()) {
            resolve(report);
        }
        for (_, spec) in self.plugins_mut() {
            resolve(&mut spec.path);
            for dir in &mut spec.grants.dirs {
                resolve(&mut dir.host);
            }
        }
    }
}

/// Why the config at `path` (or a file it includes) cannot be read, as a
/// problem: a TOML error at its file, line and column, with the lines it
/// points at; an include that cannot be read at the `include` naming it.
fn unreadable(path: &Path, error: vars::IncludeError) -> Problem {
    match error {
        vars::IncludeError::Toml { path: file, source } => {
            let mut message = match source.span() {
                Some(span) => {
                    let text = std::fs::read_to_string(&file).unwrap_or_default();
                    let (line, column) = super::locate::line_and_column(&text, span.start);
                    format!(
                        "{}:{line}:{column}: {}",
                        file.display(),
                        source.message().trim()
                    )
                }
                None => format!("{}: {}", file.display(), source.message().trim()),
            };
            // toml's picture of the line, under it.
            let shown = source.to_string();
            let picture: Vec<&str> = shown
                .lines()
                .skip(1)
                .take_while(|l| l.contains('|'))
                .collect();
            if !picture.is_empty() {
                message.push('\n');
                message.push_str(&picture.join("\n"));
            }
            Problem::whole(message)
        }
        vars::IncludeError::Read { path: ref file, .. } if file != path => {
            Problem::new("include", error.to_string())
        }
        other => Problem::whole(other.to_string()),
    }
}

/// Set `a__b__c` in `table` to `value`, parsed as a TOML value when it is one
/// (numbers, booleans, arrays, durations in quotes), else taken as a string.
fn apply_override(table: &mut toml::Table, path: &str, value: &str) -> Result<(), OverrideError> {
    let keys: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
    if keys.iter().any(String::is_empty) {
        return Err(OverrideError::EmptyKey);
    }
    if matches!(keys[0].as_str(), "connectors" | "pipelines") {
        return Err(OverrideError::NotOverridable);
    }
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_owned()));
    let (last, parents) = keys.split_last().ok_or(OverrideError::EmptyName)?;
    let mut node = table;
    for key in parents {
        node = node
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| OverrideError::NotASection(key.clone()))?;
    }
    node.insert(last.clone(), parsed);
    Ok(())
}
