//! Whether a tenant may run a config it submitted, and the config as it
//! will run: only the tenant's own pipelines, only the plugins the operator
//! allows it, grants within what the operator gave it, limits within its
//! ceilings, and nothing of the server's (its files, environment, Kafka
//! cluster, other tenants).

use std::path::{Path, PathBuf};

use crate::config::{Config, TenantConfig};

use super::operator::{OperatorConfig, TenantPolicy};

/// Why a submitted config was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The config is not valid (400): each problem with its location.
    Invalid(Vec<(String, String)>),
    /// The config is valid but asks for what the tenant may not have (403).
    Forbidden(Vec<String>),
}

/// Most worker threads (per pipeline) a submitted run may have.
const MAX_THREADS: usize = 16;
/// Most MiB a submitted run's in-memory queues may hold.
const MAX_QUEUE_MIB: usize = 1024;

/// Keys a submitted config may not set: the operator's.
const OPERATOR_KEYS: [(&str, &str); 5] = [
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
    ("runner.cache_dir", "the component cache is the operator's"),
];

/// `text`, submitted by `tenant`, as it may run; its dead letters go to
/// `dead_letters` (a file of the run's own).
pub fn admit(
    text: &str,
    tenant: &TenantPolicy,
    operator: &OperatorConfig,
    dead_letters: &Path,
) -> Result<Config, Refusal> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| Refusal::Invalid(vec![(String::new(), e.to_string())]))?;
    let mut forbidden: Vec<String> = OPERATOR_KEYS
        .iter()
        .filter(|(key, _)| lookup(&table, key).is_some())
        .map(|(key, why)| format!("{key}: {why}"))
        .collect();
    if lookup(&table, "dead_letters.path").is_some() {
        forbidden.push("dead_letters.path: each run's dead letters are kept by weir serve".into());
    }
    if !forbidden.is_empty() {
        return Err(Refusal::Forbidden(forbidden));
    }
    // No environment: `${VAR}` must have a default, and nothing of the
    // server's environment reaches a tenant's config.
    let plugin_dir = &operator.server.plugin_dir;
    let mut config = Config::parse(text, plugin_dir, std::iter::empty()).map_err(|errors| {
        Refusal::Invalid(
            errors
                .0
                .into_iter()
                .map(|e| (e.location, e.message))
                .collect(),
        )
    })?;
    let problems = config.check();
    if !problems.is_empty() {
        return Err(Refusal::Invalid(
            problems
                .into_iter()
                .map(|e| (e.location, e.message))
                .collect(),
        ));
    }
    let forbidden = forbidden_parts(&config, tenant, operator);
    if !forbidden.is_empty() {
        return Err(Refusal::Forbidden(forbidden));
    }
    let pipelines: Vec<String> = config.pipelines.iter().map(|p| p.name.clone()).collect();
    for spec in config.plugins_mut() {
        spec.limits = spec.limits.or(&tenant.limits);
        spec.tenant = Some(tenant.name.clone());
    }
    config.tenants = vec![TenantConfig {
        name: tenant.name.clone(),
        pipelines,
        limits: tenant.limits.clone(),
    }];
    config.dead_letters.path = dead_letters.to_path_buf();
    Ok(config)
}

/// What `config` asks for that `tenant` may not have, each with the reason.
fn forbidden_parts(
    config: &Config,
    tenant: &TenantPolicy,
    operator: &OperatorConfig,
) -> Vec<String> {
    let mut out = Vec::new();
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
        match owner(pipeline) {
            Some(t) if t == tenant.name => {}
            Some(_) => out.push(format!(
                "{location}: pipeline `{pipeline}` is another tenant's"
            )),
            None => out.push(format!(
                "{location}: pipeline `{pipeline}` is not one of tenant `{}`'s ({})",
                tenant.name,
                tenant.pipelines.join(", ")
            )),
        }
    }
    if config.worker.threads > MAX_THREADS {
        out.push(format!(
            "worker.threads: {} is more than a run may have here ({MAX_THREADS})",
            config.worker.threads
        ));
    }
    if config.publisher.queue_max_mib > MAX_QUEUE_MIB {
        out.push(format!(
            "publisher.queue_max_mib: {} is more than a run may hold here ({MAX_QUEUE_MIB})",
            config.publisher.queue_max_mib
        ));
    }
    let allowed_dirs: Vec<PathBuf> = tenant
        .dirs
        .iter()
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    for (location, spec) in config.plugins() {
        let file = spec.path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let in_dir = spec.path.parent() == Some(operator.server.plugin_dir.as_path());
        if !in_dir || !tenant.plugins.iter().any(|p| p == file) {
            out.push(format!(
                "{location}.plugin.path: `{}` is not a plugin tenant `{}` may use ({})",
                spec.path
                    .strip_prefix(&operator.server.plugin_dir)
                    .unwrap_or(&spec.path)
                    .display(),
                tenant.name,
                tenant.plugins.join(", ")
            ));
        }
        for (i, dir) in spec.grants.dirs.iter().enumerate() {
            let inside = dir
                .host
                .canonicalize()
                .is_ok_and(|host| allowed_dirs.iter().any(|root| host.starts_with(root)));
            if !inside {
                out.push(format!(
                    "{location}.plugin.grants.dirs[{i}]: `{}` is not under a directory tenant `{}` may grant",
                    dir.host.display(),
                    tenant.name
                ));
            }
        }
        for host in &spec.grants.http {
            let allowed = tenant.http.iter().any(|a| {
                a == host || (!a.contains(':') && host.split(':').next() == Some(a.as_str()))
            });
            if !allowed {
                out.push(format!(
                    "{location}.plugin.grants.http: `{host}` is not a host tenant `{}` may reach",
                    tenant.name
                ));
            }
        }
        for over in spec.limits.over(&tenant.limits) {
            out.push(format!(
                "{location}.plugin.limits.{over}: over tenant `{}`'s ceiling",
                tenant.name
            ));
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
