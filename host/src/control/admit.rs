//! Whether a tenant may run a config it submitted, and the config as it
//! will run: only the tenant's own pipelines, only the plugins the operator
//! allows it, grants within what the operator gave it, limits within its
//! ceilings, and nothing of the server's (its files, environment, Kafka
//! cluster, other tenants).

use std::path::{Path, PathBuf};

use crate::config::{Config, PluginAt, TenantConfig};
use crate::core::problem::{Problem, Problems};
use crate::plugin::{HttpAllow, OpenedDir, file_sha256, relative_below};

use super::operator::{OperatorConfig, TenantPolicy};

/// Why a submitted config was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The config is not valid (400): each problem with its location.
    Invalid(Problems),
    /// The config is valid but asks for what the tenant may not have (403).
    Forbidden(Problems),
}

/// Most worker threads (per pipeline) a submitted run may have.
pub(super) const MAX_THREADS: usize = 16;
/// Most MiB a submitted run's in-memory queues may hold.
pub(super) const MAX_QUEUE_MIB: usize = 1024;
/// Most plugin instances a submitted run may hold at once: its connectors,
/// each stage once per worker thread, and its indexers' instances.
pub(super) const MAX_INSTANCES: usize = 256;

/// Keys a submitted config may not set: the operator's.
const OPERATOR_KEYS: [(&str, &str); 7] = [
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
        "state",
        "each tenant's connector state is kept by weir serve, apart from every other tenant's",
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
    Problems(config.check())
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
    Ok(config)
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
    // Saturating: the counts are the tenant's numbers, as large as it likes.
    let instances = config
        .pipelines
        .iter()
        .map(|p| p.stages.len().saturating_mul(config.worker.threads))
        .chain(config.indexers().map(|(_, i)| i.instances))
        .fold(config.connectors.len(), usize::saturating_add);
    if instances > MAX_INSTANCES {
        out.at(
            "pipelines",
            format!(
                "{instances} plugin instances (connectors, stages times worker.threads, \
                 indexer instances) are more than a run may have here ({MAX_INSTANCES})"
            ),
        );
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
        for over in spec.limits.over(&tenant.limits) {
            out.at(
                format!("{location}.plugin.limits.{over}"),
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
mod tests {
    use super::*;

    /// An operator config with tenant `acme` (pipeline `a`, plugin `p.wasm`,
    /// directory `acme/`) and `zeta` (pipeline `z`), in `dir`.
    fn operator(dir: &Path) -> OperatorConfig {
        operator_with(dir, "{ memory_mib = 64 }")
    }

    /// [`operator`], with acme's `limits`.
    fn operator_with(dir: &Path, limits: &str) -> OperatorConfig {
        std::fs::create_dir_all(dir.join("plugins")).expect("plugins dir");
        std::fs::write(dir.join("plugins/p.wasm"), b"").expect("plugin file");
        std::fs::create_dir_all(dir.join("acme/data")).expect("tenant dir");
        std::fs::create_dir_all(dir.join("elsewhere")).expect("other dir");
        let text = r#"
            [server]
            data_dir = "data"
            plugin_dir = "plugins"
            [[tenants]]
            name = "acme"
            token_env = "T"
            pipelines = ["a"]
            plugins = ["p.wasm"]
            dirs = ["acme"]
            http = ["search.acme.internal", "10.20.0.0/16:9200"]
            limits = LIMITS
            [[tenants]]
            name = "zeta"
            token_env = "Z"
            pipelines = ["z"]
            plugins = ["p.wasm"]
        "#
        .replace("LIMITS", limits);
        let path = dir.join("operator.toml");
        std::fs::write(&path, text).expect("operator config");
        OperatorConfig::load(&path).expect("valid operator config")
    }

    /// `grants` granting `host` as `/d`, for [`run`].
    fn dir_grant(host: &Path) -> String {
        format!(
            ", grants = {{ dirs = [{{ host = {:?}, guest = \"/d\" }}] }}",
            host.display().to_string()
        )
    }

    fn run(pipeline: &str, grants: &str) -> String {
        format!(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "{pipeline}"
            plugin = {{ path = "p.wasm"{grants} }}
            [[pipelines]]
            name = "{pipeline}"
            [indexer]
            plugin = {{ path = "p.wasm" }}
            "#
        )
    }

    fn forbidden(text: &str, dir: &Path) -> Vec<String> {
        let operator = operator(dir);
        let acme = operator.tenant("acme").expect("acme");
        match admit(text, acme, &operator, &dir.join("dl.jsonl")) {
            Err(Refusal::Forbidden(reasons)) => reasons.iter().map(ToString::to_string).collect(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn an_admitted_config_gets_the_tenants_ceilings_and_its_own_dead_letters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let operator = operator(dir.path());
        let acme = operator.tenant("acme").expect("acme");
        let grant = dir_grant(&dir.path().join("acme/data"));
        let config = admit(
            &run("a", &grant),
            acme,
            &operator,
            &dir.path().join("dl.jsonl"),
        )
        .expect("admitted");
        assert_eq!(config.tenant_of("a"), Some("acme"));
        assert_eq!(config.dead_letters.path, dir.path().join("dl.jsonl"));
        for PluginAt { spec, .. } in config.plugins() {
            assert_eq!(spec.limits.memory_mib, Some(64));
            // The plugin file as admitted (an empty one here).
            assert_eq!(
                spec.sha256.as_deref(),
                Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
            );
        }
    }

    #[test]
    fn the_tenants_limits_a_config_leaves_unset_are_checked_with_it() {
        // acme's calls may last 10 minutes, and that is what a plugin
        // whose config sets no call_timeout gets: longer than the default
        // 5-minute stall timeout, so the run could never start.
        let dir = tempfile::tempdir().expect("tempdir");
        let operator = operator_with(dir.path(), r#"{ call_timeout = "10m" }"#);
        let acme = operator.tenant("acme").expect("acme");
        let dead_letters = dir.path().join("dl.jsonl");
        match admit(&run("a", ""), acme, &operator, &dead_letters) {
            Err(Refusal::Invalid(problems)) => assert!(
                problems.iter().any(|p| p.location == "runner.stall_timeout"
                    && p.message.contains("call_timeout 600s")),
                "{problems:?}"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let longer = format!("[runner]\nstall_timeout = \"11m\"\n{}", run("a", ""));
        admit(&longer, acme, &operator, &dead_letters).expect("admitted");
    }

    #[test]
    fn http_grants_must_be_covered_by_the_tenants_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let operator = operator(dir.path());
        let acme = operator.tenant("acme").expect("acme");
        let within = r#", grants = { http = ["search.acme.internal:9200", "10.20.1.2:9200", "10.20.4.0/24:9200"] }"#;
        admit(
            &run("a", within),
            acme,
            &operator,
            &dir.path().join("dl.jsonl"),
        )
        .expect("admitted");
        let beyond = r#", grants = { http = ["10.20.1.2:80", "10.0.0.0/8:9200", "search.acme.internal.evil", "x:bad"] }"#;
        let reasons = forbidden(&run("a", beyond), dir.path());
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        for (i, expected) in [
            "`10.20.1.2:80` is not a host or address tenant `acme` may reach",
            "`10.0.0.0/8:9200` is not",
            "`search.acme.internal.evil` is not",
            "not a port number",
        ]
        .iter()
        .enumerate()
        {
            assert!(
                reasons[i].contains(&format!("grants.http[{i}]")) && reasons[i].contains(expected),
                "{reasons:?}"
            );
        }
    }

    #[test]
    fn a_tenants_http_entries_are_checked_when_the_operator_config_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("operator.toml");
        let text = r#"
            [server]
            data_dir = "data"
            plugin_dir = "plugins"
            [[tenants]]
            name = "acme"
            token_env = "T"
            pipelines = ["a"]
            plugins = []
            http = ["10.0.0.5/8", "http://x"]
        "#;
        std::fs::write(&path, text).expect("operator config");
        let err = OperatorConfig::load(&path)
            .expect_err("invalid")
            .to_string();
        assert!(
            err.contains("tenants.acme.http: `10.0.0.5/8`") && err.contains("`http://x`"),
            "{err}"
        );
    }

    #[test]
    fn a_symlink_out_of_the_tenants_directory_is_not_a_way_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        operator(dir.path());
        let link = dir.path().join("acme/escape");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).expect("symlink");
        let grant = dir_grant(&link);
        let reasons = forbidden(&run("a", &grant), dir.path());
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("not a directory under one")),
            "{reasons:?}"
        );
    }

    #[test]
    fn an_admitted_grant_is_the_directory_admitted_whatever_its_path_leads_to_later() {
        let dir = tempfile::tempdir().expect("tempdir");
        let operator = operator(dir.path());
        let acme = operator.tenant("acme").expect("acme");
        let data = dir.path().join("acme/data");
        std::fs::write(data.join("mine.txt"), "mine").expect("write");
        std::fs::write(dir.path().join("elsewhere/secret.txt"), "theirs").expect("write");
        let grant = dir_grant(&data);
        let config =
            admit(&run("a", &grant), acme, &operator, &dir.path().join("dl")).expect("admitted");
        // The tenant swaps its folder for a link once admitted.
        std::fs::rename(&data, dir.path().join("acme/old")).expect("rename");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &data).expect("symlink");

        let opened = config.connectors[0].plugin.grants.dirs[0]
            .opened
            .clone()
            .expect("opened at admission");
        let listed: Vec<_> = std::fs::read_dir(opened.handle_path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(listed, ["mine.txt"]);
    }

    #[test]
    fn a_run_may_hold_only_so_many_plugin_instances() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stages: Vec<String> = (0..20)
            .map(|i| format!("{{ name = \"s{i}\", plugin = {{ path = \"p.wasm\" }} }}"))
            .collect();
        let text = run("a", "").replace(
            "name = \"a\"\n",
            &format!(
                "name = \"a\"\n            stages = [{}]\n",
                stages.join(", ")
            ),
        ) + "\n[worker]\nthreads = 16\n";
        let reasons = forbidden(&text, dir.path());
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("322 plugin instances") && r.contains("(256)")),
            "{reasons:?}"
        );
    }

    #[test]
    fn the_largest_counts_are_refused_without_overflowing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = run("a", "").replace(
            "name = \"a\"\n",
            "name = \"a\"\nstages = [{ name = \"s\", plugin = { path = \"p.wasm\" } }, \
             { name = \"t\", plugin = { path = \"p.wasm\" } }]\n",
        ) + "instances = 9223372036854775807\n[worker]\nthreads = 9223372036854775807\n";
        let reasons = forbidden(&text, dir.path());
        assert!(
            reasons.iter().any(|r| r.starts_with("worker.threads:"))
                && reasons
                    .iter()
                    .any(|r| r.contains(&format!("{} plugin instances", usize::MAX))),
            "{reasons:?}"
        );
    }

    #[test]
    fn grants_that_climb_out_or_do_not_exist_are_refused_alike() {
        let dir = tempfile::tempdir().expect("tempdir");
        operator(dir.path());
        let outside = dir.path().join("elsewhere");
        let missing_outside = dir.path().join("nothing-here");
        let paths = [
            dir.path().join("acme/data/../../elsewhere"),
            dir.path().join("acme/../elsewhere"),
            outside.clone(),
            missing_outside.clone(),
            dir.path().join("acme/data/../../nothing-here"),
        ];
        let mut messages = Vec::new();
        for path in &paths {
            let grant = dir_grant(path);
            let reasons = forbidden(&run("a", &grant), dir.path());
            assert_eq!(reasons.len(), 1, "{reasons:?}");
            // The same words whether or not the path exists outside.
            messages.push(reasons[0].replace(&path.display().to_string(), "PATH"));
        }
        messages.dedup();
        assert_eq!(messages.len(), 1, "{messages:?}");
    }

    #[test]
    fn the_operators_keys_and_other_tenants_pipelines_are_refused_all_at_once_as_unknown_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reasons = forbidden(
            &format!(
                "[metrics]\naddr = \"0.0.0.0:1\"\n[runner]\ncache_dir = \"/tmp\"\n\
                 cache_max_mib = 1\n{}",
                run("a", "")
            ),
            dir.path(),
        );
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(
            reasons[2].starts_with("runner.cache_max_mib: the component cache is the operator's"),
            "{reasons:?}"
        );
        let reasons = forbidden(&run("z", ""), dir.path());
        assert!(
            reasons
                .iter()
                .all(|r| r.contains("is not one of tenant `acme`'s"))
                && reasons.len() == 2,
            "the pipeline and the connector naming it: {reasons:?}"
        );
    }
}
