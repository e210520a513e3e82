//! Whether a tenant may run a config it submitted, and the config as it
//! will run: only the tenant's own pipelines, only the plugins the operator
//! allows it, grants within what the operator gave it, limits within its
//! ceilings, and nothing of the server's (its files, environment, Kafka
//! cluster, other tenants).

use std::path::{Path, PathBuf};

use crate::config::{Config, PluginAt, TenantConfig};
use crate::core::problem::{Problem, Problems};
use crate::plugin::{HttpAllow, OpenedDir, SqlTarget, file_sha256, relative_below};

use super::operator::{OperatorConfig, TenantPolicy};

pub use super::refusal::Refusal;

/// Most worker threads (per pipeline) a submitted run may have.
pub(crate) const MAX_THREADS: usize = 16;
/// Most MiB a submitted run's in-memory queues may hold.
pub(crate) const MAX_QUEUE_MIB: usize = 1024;
/// Most plugin instances a submitted run may hold at once: its connectors,
/// each stage once per worker thread, and its indexers' instances.
pub(crate) const MAX_INSTANCES: usize = 256;

/// Keys a submitted config may not set: the operator's.
const OPERATOR_KEYS: [(&str, &str); 8] = [
    (
        "include",
        "a submitted config cannot include files of the server",
    ),
    ("kafka", "runs submitted to weir serve are local runs"),
    (
        "tenants",
        "tenants are the operator's (the token says which one you are)",
    ),
    ("metrics", "weir serve serves the metrics"),
    (
        "state.path",
        "each tenant's connector state is kept by weir serve, apart from every other tenant's (a config may name its sync: `[state] id`)",
    ),
    (
        "cache.path",
        "each tenant's cache is kept by weir serve, apart from every other tenant's",
    ),
    ("runner.cache_dir", "the component cache is the operator's"),
    (
        "runner.cache_max_mib",
        "the component cache is the operator's (shared by every tenant)",
    ),
];

/// `text`, submitted by `tenant`, as it may run; its dead letters go to
/// `dead_letters` (a file of the run's own).
pub fn admit(
    text: &str,
    tenant: &TenantPolicy,
    operator: &OperatorConfig,
    dead_letters: &Path,
) -> Result<Config, Refusal> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        Refusal::Invalid(Problems::one(Problem::whole(e.to_string())))
    })?;
    let mut forbidden: Problems = OPERATOR_KEYS
        .iter()
        .filter(|(key, _)| lookup(&table, key).is_some())
        .map(|(key, why)| Problem::new(*key, *why))
        .collect();
    if lookup(&table, "dead_letters.path").is_some() {
        forbidden.at(
            "dead_letters.path",
            "each run's dead letters are kept by weir serve",
        );
    }
    if lookup(&table, "trace.path").is_some() {
        forbidden.at(
            "trace.path",
            "each run's trace is kept by weir serve, in the run's folder (`[trace] enabled = true` is enough)",
        );
    }
    forbidden.or_ok(()).map_err(Refusal::Forbidden)?;
    // No environment: `${VAR}` must have a default, and nothing of the
    // server's environment reaches a tenant's config.
    let plugin_dir = &operator.server.plugin_dir;
    let mut config =
        Config::parse(text, plugin_dir, std::iter::empty()).map_err(Refusal::Invalid)?;
    // What the tenant may not have is refused before the config is
    // checked: the checks look at files (does a plugin or a granted
    // directory exist?), and their answers must never tell a tenant about
    // paths outside its own folders.
    let mut forbidden = forbidden_parts(&config, tenant, operator);
    forbidden.extend(open_grants(&mut config, tenant));
    forbidden.or_ok(()).map_err(Refusal::Forbidden)?;
    // The checks see the limits the run will have: those the config leaves
    // unset are the tenant's, and they must fit the rest of the config (a
    // tenant's `call_timeout` longer than the config's stall timeout is
    // refused here, not when the run starts).
    for (_, spec) in config.plugins_mut() {
        spec.limits = spec.limits.or(&tenant.limits);
    }
    Problems(
        config
            .check()
            .into_iter()
            .chain(config.needs_a_source())
            .collect(),
    )
    .or_ok(())
    .map_err(Refusal::Invalid)?;
    let pipelines: Vec<String> = config.pipelines.iter().map(|p| p.name.clone()).collect();
    let mut digests = std::collections::HashMap::new();
    for (_, spec) in config.plugins_mut() {
        // What is admitted is what runs: a plugin file changed before the
        // run loads it is refused then, as a pinned one would be.
        if spec.sha256.is_none() {
            spec.sha256 = digests
                .entry(spec.path.clone())
                .or_insert_with(|| file_sha256(&spec.path).ok())
                .clone();
        }
    }
    config.tenants = vec![TenantConfig {
        name: tenant.name.clone(),
        pipelines,
        limits: tenant.limits.clone(),
    }];
    config.dead_letters.path = dead_letters.to_path_buf();
    // A file per tenant: no config can name another tenant's state.
    config.state.path = operator
        .server
        .data_dir
        .join("state")
        .join(format!("{}.sqlite", tenant.name));
    // Two configs of the tenant share state only when they name the same
    // sync; one that names none is its sources and destinations.
    if config.state.id.is_none() {
        config.state.id = Some(super::sync_id::default_sync_id(&config));
    }
    // The same for the plugins' cache: a tenant never sees another's entries.
    config.cache.path = operator
        .server
        .data_dir
        .join("cache")
        .join(format!("{}.sqlite", tenant.name));
    Ok(config)
}

/// Whether every server a `grants.sql` connection URL leads to is one
/// `tenant` may reach (`sql` of its policy); the reason when not. The URL
/// is read as the connection reads it ([`SqlTarget`]): what is checked here
/// is what the plugin's host dials. The URL itself (its password) is never
/// in the reason.
pub(crate) fn sql_reachable(url: &str, tenant: &TenantPolicy) -> Result<(), String> {
    let target = SqlTarget::parse(url).map_err(|e| e.to_string())?;
    let allowed: Vec<HttpAllow> = tenant
        .sql
        .iter()
        .filter_map(|entry| HttpAllow::parse(entry).ok())
        .collect();
    for server in target.servers() {
        let wanted = HttpAllow::parse(&server.to_string()).map_err(|e| e.to_string())?;
        if !allowed.iter().any(|a| a.covers(&wanted)) {
            return Err(format!(
                "`{server}` is not a database server tenant `{}` may reach",
                tenant.name
            ));
        }
    }
    Ok(())
}

/// What `config` asks for that `tenant` may not have, each with the reason.
fn forbidden_parts(config: &Config, tenant: &TenantPolicy, operator: &OperatorConfig) -> Problems {
    let mut out = Problems::default();
    let owner = |pipeline: &str| {
        operator
            .tenants
            .iter()
            .find(|t| t.pipelines.iter().any(|p| p == pipeline))
            .map(|t| t.name.as_str())
    };
    let named = config
        .pipelines
        .iter()
        .map(|p| (format!("pipelines.{}", p.name), &p.name))
        .chain(
            config
                .connectors
                .iter()
                .map(|c| (format!("connectors.{}.pipeline", c.name), &c.pipeline)),
        );
    for (location, pipeline) in named {
        // Another tenant's pipeline is refused as an unknown one is: a
        // refusal never says which names other tenants own.
        match owner(pipeline) {
            Some(t) if t == tenant.name => {}
            _ => out.at(
                location,
                format!(
                    "pipeline `{pipeline}` is not one of tenant `{}`'s ({})",
                    tenant.name,
                    tenant.pipelines.join(", ")
                ),
            ),
        }
    }
    if config.worker.threads > MAX_THREADS {
        out.at(
            "worker.threads",
            format!(
                "{} is more than a run may have here ({MAX_THREADS})",
                config.worker.threads
            ),
        );
    }
    // A report file is written by the host: a tenant reads its shadows'
    // differences in its metrics and the run's log instead.
    for p in &config.pipelines {
        for s in &p.stages {
            if s.shadow
                .as_ref()
                .is_some_and(|shadow| shadow.report.is_some())
            {
                out.at(
                    format!("pipelines.{}.stages.{}.shadow.report", p.name, s.name),
                    "a shadow's report file is the operator's: leave it out (differences are counted in metrics and logged)",
                );
            }
        }
    }
    // Saturating: the counts are the tenant's numbers, as large as it likes.
    // As the one walk counts them (a stage and its shadow each one instance
    // per worker thread); the dead letters' indexer is the operator's.
    let instances = config
        .plugins()
        .filter(|at| !matches!(at.role, crate::config::PluginRole::DeadLetters))
        .map(|at| at.instances)
        .fold(0, usize::saturating_add);
    if instances > MAX_INSTANCES {
        out.at(
            "pipelines",
            format!(
                "{instances} plugin instances (connectors, stages times worker.threads, \
                 indexer instances) are more than a run may have here ({MAX_INSTANCES})"
            ),
        );
    }
    // The cache's file is on the server's disk: a tenant keeps at most the
    // default there.
    for (key, value, max) in [
        (
            "cache.max_mib",
            config.cache.max_mib,
            crate::config::CacheConfig::default().max_mib,
        ),
        (
            "cache.max_entries",
            config.cache.max_entries,
            crate::config::CacheConfig::default().max_entries,
        ),
    ] {
        if value > max {
            out.at(
                key,
                format!("{value} is more than a tenant may keep here ({max})"),
            );
        }
    }
    if config.publisher.queue_max_mib > MAX_QUEUE_MIB {
        out.at(
            "publisher.queue_max_mib",
            format!(
                "{} is more than a run may hold here ({MAX_QUEUE_MIB})",
                config.publisher.queue_max_mib
            ),
        );
    }
    for PluginAt { location, spec, .. } in config.plugins() {
        let file = spec.path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let in_dir = spec.path.parent() == Some(operator.server.plugin_dir.as_path());
        if !in_dir || !tenant.plugins.iter().any(|p| p == file) {
            out.at(
                format!("{location}.plugin.path"),
                format!(
                    "`{}` is not a plugin tenant `{}` may use ({})",
                    spec.path
                        .strip_prefix(&operator.server.plugin_dir)
                        .unwrap_or(&spec.path)
                        .display(),
                    tenant.name,
                    tenant.plugins.join(", ")
                ),
            );
        }
        let reachable: Vec<HttpAllow> = tenant
            .http
            .iter()
            .filter_map(|entry| HttpAllow::parse(entry).ok())
            .collect();
        for (i, entry) in spec.grants.http.iter().enumerate() {
            let why = match HttpAllow::parse(entry) {
                Ok(grant) if reachable.iter().any(|r| r.covers(&grant)) => continue,
                Ok(_) => format!(
                    "`{entry}` is not a host or address tenant `{}` may reach",
                    tenant.name
                ),
                Err(e) => e.to_string(),
            };
            out.at(format!("{location}.plugin.grants.http[{i}]"), why);
        }
        for (name, url) in &spec.grants.sql {
            if let Err(why) = sql_reachable(url, tenant) {
                out.at(format!("{location}.plugin.grants.sql.{name}"), why);
            }
        }
        for (name, grant) in &spec.grants.kafka {
            for (key, why) in super::kafka_grants::forbidden(grant, tenant) {
                out.at(format!("{location}.plugin.grants.kafka.{name}.{key}"), why);
            }
        }
        for (name, grant) in &spec.grants.queues {
            for (key, why) in super::queue_grants::forbidden(grant, tenant) {
                out.at(format!("{location}.plugin.grants.queues.{name}.{key}"), why);
            }
        }
        for (name, grant) in &spec.grants.push {
            if grant.buffer > tenant.push.max_buffer {
                out.at(
                    format!("{location}.plugin.grants.push.{name}.buffer"),
                    format!(
                        "over tenant `{}`'s {} ({})",
                        tenant.name,
                        crate::core::limit::Limit::PushBuffer,
                        tenant.push.max_buffer
                    ),
                );
            }
        }
        for over in spec.limits.over(&tenant.limits) {
            out.at(
                format!("{location}.plugin.{over}"),
                format!("over tenant `{}`'s ceiling", tenant.name),
            );
        }
    }
    out
}

/// Open every directory `config` grants beneath one of the directories
/// `tenant` may grant, and keep the handle in the grant: what its plugins
/// reach is what was checked here, whatever the tenant does to the path
/// later. A path that is not a directory beneath one of them, or that leads
/// out through a link, is refused with one message whatever the reason, so
/// a refusal says nothing of what exists outside the tenant's folders.
fn open_grants(config: &mut Config, tenant: &TenantPolicy) -> Problems {
    // The operator's paths, as written and as resolved, each with a handle.
    let roots: Vec<(Vec<PathBuf>, OpenedDir)> = tenant
        .dirs
        .iter()
        .filter_map(|root| {
            let handle = OpenedDir::open(root).ok()?;
            let names = std::iter::once(root.clone())
                .chain(root.canonicalize().ok())
                .collect();
            Some((names, handle))
        })
        .collect();
    let beneath = |path: &Path| {
        roots.iter().find_map(|(names, handle)| {
            names
                .iter()
                .find_map(|name| relative_below(path, name))
                .and_then(|relative| handle.open_beneath(&relative).ok())
        })
    };
    let mut out = Problems::default();
    let locations: Vec<String> = config.plugins().map(|at| at.location).collect();
    for (location, (_, spec)) in locations.iter().zip(config.plugins_mut()) {
        for (i, dir) in spec.grants.dirs.iter_mut().enumerate() {
            dir.opened = beneath(&dir.host);
            if dir.opened.is_none() {
                out.at(
                    format!("{location}.plugin.grants.dirs[{i}]"),
                    format!(
                        "`{}` is not a directory under one tenant `{}` may grant \
                         (nor may a link in it lead out of one)",
                        dir.host.display(),
                        tenant.name
                    ),
                );
            }
        }
    }
    out
}

/// The value at a dotted `path` of `table`.
fn lookup<'a>(table: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
    let mut parts = path.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

#[cfg(test)]
#[path = "admit_tests.rs"]
mod tests;
