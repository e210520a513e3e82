//! The operator's config for `weir serve`: where it listens and keeps its
//! state, which plugins exist, and what each tenant may do.
//!
//! ```toml
//! [server]
//! addr = "127.0.0.1:8750"
//! data_dir = "serve-data"            # the store of runs, their dead letters
//! plugin_dir = "../plugins/dist"     # the plugins tenants name, by file name
//! admin_token_env = "WEIR_ADMIN_TOKEN"  # optional: sees every tenant's runs
//! max_connections = 1024             # open at once; more are closed at once
//! max_connections_per_address = 256  # of them from one client address
//! header_read_timeout = "10s"        # to send a request's headers; idle connections close after it
//! body_read_timeout = "30s"          # to send a submitted config
//! requests_per_second = 50           # per token, after a burst of
//! request_burst = 100
//! keep_runs = 1000                   # finished runs kept per tenant (the newest)
//! keep_runs_for = "30d"              # optional: and none finished longer ago
//!
//! [[tenants]]
//! name = "acme"
//! token_env = "WEIR_TOKEN_ACME"      # the tenant's bearer token, from the environment
//! pipelines = ["acme-books"]         # the pipeline names its configs may use
//! plugins = ["file_connector.wasm", "jsonl_indexer.wasm"]
//! dirs = ["/srv/acme"]               # host directories its plugins may be granted
//! http = ["search.acme.internal", "10.20.0.0/16:9200"]  # hosts, and the private addresses they are at
//! max_concurrent_runs = 2
//! max_docs_per_second = 10000
//! limits = { memory_mib = 128 }      # ceilings (and defaults) for its plugins
//! ```
//!
//! Relative paths are relative to the file. Tokens never sit in the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plugin::Limits;

/// Why the operator's config cannot be used. Each message names the file
/// (and is the whole story: the I/O or TOML error is part of it).
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {}", path.display(), error.message().trim())]
    Parse {
        path: PathBuf,
        error: toml::de::Error,
    },
    /// Every problem of a config that parses.
    #[error("{}:\n  {}", path.display(), problems.join("\n  "))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
}

/// The whole operator config.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    pub server: ServerConfig,
    #[serde(default)]
    pub tenants: Vec<TenantPolicy>,
    /// Runs go to a fleet of `weir fleet` workers over Kafka, and a
    /// standby control plane can take them over (`weir fleet`).
    #[serde(default)]
    pub fleet: Option<super::spec::FleetConfig>,
}

/// `[server]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `host:port` of the API, the status page, `/metrics` and the health
    /// endpoints. Default `127.0.0.1:8750`.
    #[serde(default = "ServerConfig::default_addr")]
    pub addr: String,
    /// The store of runs (SQLite) and each run's dead letters.
    pub data_dir: PathBuf,
    /// The directory of the plugins tenants may name (by file name).
    pub plugin_dir: PathBuf,
    /// The environment variable holding the operator's token, which sees
    /// (and may stop) every tenant's runs.
    #[serde(default)]
    pub admin_token_env: Option<String>,
    /// The compiled-component cache (default: the user's cache directory).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// A metric series not updated for this long is dropped from
    /// `/metrics` (default 15 minutes): finished runs' pipelines,
    /// connectors and stages do not pile up as series.
    #[serde(
        default = "ServerConfig::default_metrics_idle_timeout",
        with = "humantime_serde"
    )]
    pub metrics_idle_timeout: Duration,
    /// Where submitted runs run: `process` (default), each in a process of
    /// its own, so that nothing a run does can take the server or another
    /// run with it; or `thread`, on threads of the server's process.
    #[serde(default)]
    pub isolation: RunIsolation,
    /// The most writable memory a run's process may map, in MiB (default
    /// 4,096): past it the run's allocations fail, and it ends `failure`.
    #[serde(default = "ServerConfig::default_run_memory_mib")]
    pub run_memory_mib: u64,
    /// Connections open at once; one more is closed as soon as it is
    /// accepted. Default 1024.
    #[serde(default = "ServerConfig::default_max_connections")]
    pub max_connections: usize,
    /// Connections open at once from one client address (no one client
    /// holds them all before it has shown a token). Default 256, and never
    /// more than `max_connections`; behind a proxy, raise it to that.
    #[serde(default = "ServerConfig::default_max_connections_per_address")]
    pub max_connections_per_address: usize,
    /// How long a client has to send a request's headers (from connecting,
    /// or from its previous answer: an idle kept-alive connection is closed
    /// after as long). Default 10 s.
    #[serde(
        default = "ServerConfig::default_header_read_timeout",
        with = "humantime_serde"
    )]
    pub header_read_timeout: Duration,
    /// How long a client has to send the config it submits, once its
    /// headers are in (408 after). Default 30 s.
    #[serde(
        default = "ServerConfig::default_body_read_timeout",
        with = "humantime_serde"
    )]
    pub body_read_timeout: Duration,
    /// API requests per second each token may make, once its burst is
    /// spent (429 with `Retry-After` beyond). Default 50.
    #[serde(default = "ServerConfig::default_requests_per_second")]
    pub requests_per_second: u32,
    /// API requests a token may make at once. Default 100.
    #[serde(default = "ServerConfig::default_request_burst")]
    pub request_burst: u32,
    /// Finished runs kept per tenant, the newest by submission: older ones
    /// (record, config and dead letters) are removed as runs finish.
    /// Default 1000.
    #[serde(default = "ServerConfig::default_keep_runs")]
    pub keep_runs: usize,
    /// Also remove finished runs that ended longer ago than this. None by
    /// default.
    #[serde(default, with = "humantime_serde")]
    pub keep_runs_for: Option<Duration>,
}

/// `server.isolation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunIsolation {
    #[default]
    Process,
    Thread,
}

/// Longest `header_read_timeout` and `body_read_timeout`: past it, a
/// connection is held for nothing.
const MAX_READ_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// Most `max_connections`: beyond any process's open-file limit.
const MAX_CONNECTIONS: usize = 1 << 20;
/// Most `requests_per_second` and `request_burst`.
const MAX_REQUEST_RATE: u32 = 1_000_000;
/// Most `keep_runs`.
const MAX_KEEP_RUNS: usize = 100_000_000;

impl ServerConfig {
    fn default_addr() -> String {
        "127.0.0.1:8750".into()
    }

    fn default_run_memory_mib() -> u64 {
        4096
    }

    fn default_metrics_idle_timeout() -> Duration {
        Duration::from_secs(15 * 60)
    }

    fn default_max_connections() -> usize {
        crate::http::ServerLimits::MAX_CONNECTIONS
    }

    fn default_max_connections_per_address() -> usize {
        crate::http::ServerLimits::MAX_CONNECTIONS_PER_ADDRESS
    }

    fn default_header_read_timeout() -> Duration {
        crate::http::ServerLimits::HEADER_READ_TIMEOUT
    }

    fn default_body_read_timeout() -> Duration {
        Duration::from_secs(30)
    }

    fn default_requests_per_second() -> u32 {
        50
    }

    fn default_request_burst() -> u32 {
        100
    }

    fn default_keep_runs() -> usize {
        1000
    }

    /// What the HTTP server lets its clients hold.
    pub fn http_limits(&self) -> crate::http::ServerLimits {
        crate::http::ServerLimits {
            header_read_timeout: self.header_read_timeout,
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address.min(self.max_connections),
        }
    }

    fn problems(&self, problems: &mut Vec<String>) {
        let mut out_of = |name: &str, ok: bool, range: &str| {
            if !ok {
                problems.push(format!("server.{name}: must be {range}"));
            }
        };
        out_of(
            "max_connections",
            (1..=MAX_CONNECTIONS).contains(&self.max_connections),
            &format!("from 1 to {MAX_CONNECTIONS}"),
        );
        out_of(
            "max_connections_per_address",
            (1..=MAX_CONNECTIONS).contains(&self.max_connections_per_address),
            &format!("from 1 to {MAX_CONNECTIONS}"),
        );
        for (name, value) in [
            ("header_read_timeout", self.header_read_timeout),
            ("body_read_timeout", self.body_read_timeout),
        ] {
            out_of(
                name,
                !value.is_zero() && value <= MAX_READ_TIMEOUT,
                "more than zero and at most 1h",
            );
        }
        for (name, value) in [
            ("requests_per_second", self.requests_per_second),
            ("request_burst", self.request_burst),
        ] {
            out_of(
                name,
                (1..=MAX_REQUEST_RATE).contains(&value),
                &format!("from 1 to {MAX_REQUEST_RATE}"),
            );
        }
        out_of(
            "keep_runs",
            (1..=MAX_KEEP_RUNS).contains(&self.keep_runs),
            &format!("from 1 to {MAX_KEEP_RUNS}"),
        );
        if let Some(age) = self.keep_runs_for {
            out_of(
                "keep_runs_for",
                !age.is_zero() && age <= Duration::from_secs(100 * 365 * 24 * 60 * 60),
                "more than zero and at most 100 years",
            );
        }
    }
}

/// `[[tenants]]`: what one tenant may do.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantPolicy {
    pub name: String,
    /// The environment variable holding the tenant's bearer token.
    pub token_env: String,
    /// The pipeline names the tenant's configs may use; no other tenant's.
    pub pipelines: Vec<String>,
    /// The plugin files (in `plugin_dir`) its configs may name.
    pub plugins: Vec<String>,
    /// Host directories (and what is under them) its plugins may be granted.
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
    /// What its plugins may be granted HTTP to: entries as in `grants.http`
    /// (`host`, `host:port`, addresses and ranges such as `10.0.0.0/8`), each
    /// covering the grants it is equal to or wider than.
    #[serde(default)]
    pub http: Vec<String>,
    /// The database servers its plugins may be granted (`grants.sql`):
    /// entries as in `http`, each covering the host and port of a
    /// connection URL. None by default.
    #[serde(default)]
    pub sql: Vec<String>,
    /// The Kafka brokers its plugins may be granted (`grants.kafka`
    /// brokers): entries as in `http`. None by default.
    #[serde(default)]
    pub kafka: Vec<String>,
    /// The names its `grants.kafka` topics and consumer groups may have:
    /// exact, or a prefix ending in `*` (`acme.*`). None by default.
    #[serde(default)]
    pub kafka_names: Vec<String>,
    /// The queue brokers its plugins may be granted (`grants.queues` URLs'
    /// host and port): entries as in `http`. None by default.
    #[serde(default)]
    pub queues: Vec<String>,
    /// The virtual hosts its `grants.queues` may use; empty: any.
    #[serde(default)]
    pub queue_vhosts: Vec<String>,
    /// The names its `grants.queues` queues, exchanges and dead-letter
    /// queues may have: exact, or a prefix ending in `*`. None by default.
    #[serde(default)]
    pub queue_names: Vec<String>,
    /// Runs going on at once. Default 2.
    #[serde(default = "TenantPolicy::default_max_concurrent_runs")]
    pub max_concurrent_runs: usize,
    /// Schedules kept at once (configs submitted with a `[schedule]`).
    /// Default 20; 0: the tenant may not schedule.
    #[serde(default = "TenantPolicy::default_max_schedules")]
    pub max_schedules: usize,
    /// Its bounds on documents pushed to its runs (`tenancy/push_policy.rs`).
    #[serde(default)]
    pub push: super::push_policy::PushPolicy,
    /// Documents per second published over all its runs; none by default.
    #[serde(default)]
    pub max_docs_per_second: Option<u32>,
    /// Most CPU cores its runs use together (e.g. `0.5`), held by a
    /// control group of the operating system's; none by default. Needs
    /// `server.isolation = "process"`.
    #[serde(default)]
    pub cpus: Option<f64>,
    /// Ceilings on its plugins' limits, which are also their defaults.
    #[serde(default)]
    pub limits: Limits,
    /// With a `[fleet]`: the most worker–indexer pairs one fleet worker
    /// runs for this tenant, over all its pipelines, so that no tenant takes
    /// a whole machine. Default twice `fleet.pairs`.
    #[serde(default)]
    pub fleet_pairs: Option<usize>,
}

impl TenantPolicy {
    fn default_max_concurrent_runs() -> usize {
        2
    }
    fn default_max_schedules() -> usize {
        20
    }
}

impl OperatorConfig {
    /// Read and check `path`; every problem at once.
    pub fn load(path: &Path) -> Result<Self, OperatorError> {
        let text = std::fs::read_to_string(path).map_err(|error| OperatorError::Read {
            path: path.to_owned(),
            error,
        })?;
        let mut config: Self = toml::from_str(&text).map_err(|error| OperatorError::Parse {
            path: path.to_owned(),
            error,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        resolve(&mut config.server.data_dir);
        resolve(&mut config.server.plugin_dir);
        if let Some(dir) = &mut config.server.cache_dir {
            resolve(dir);
        }
        for tenant in &mut config.tenants {
            tenant.dirs.iter_mut().for_each(resolve);
        }
        if let Some(fleet) = &mut config.fleet {
            resolve(&mut fleet.work_dir);
        }
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(OperatorError::Invalid {
                path: path.to_owned(),
                problems,
            });
        }
        Ok(config)
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        // At least what a run's process needs to start (measured: ~250 MiB
        // of writable mappings for a run of the bundled example), at most
        // what a 64-bit address space is sure to hold.
        if !(256..=1 << 30).contains(&self.server.run_memory_mib) {
            problems.push("server.run_memory_mib: must be between 256 and 1073741824".into());
        }
        let idle = self.server.metrics_idle_timeout;
        if idle.is_zero() || idle > crate::config::MAX_DURATION {
            problems.push(
                "server.metrics_idle_timeout: must be more than 0 and at most 30 days".into(),
            );
        }
        self.server.problems(&mut problems);
        if let Some(fleet) = &self.fleet {
            fleet.problems(&mut problems);
            if self.server.isolation != RunIsolation::Process {
                problems.push(
                    "fleet: a fleet's runs run in processes of their own (server.isolation = \"process\")"
                        .into(),
                );
            }
        }
        let mut names = std::collections::HashSet::new();
        let mut owners = std::collections::HashMap::new();
        for t in &self.tenants {
            if !names.insert(&t.name) {
                problems.push(format!("tenants.{}: duplicate tenant name", t.name));
            }
            for p in &t.pipelines {
                if let Some(other) = owners.insert(p, &t.name) {
                    problems.push(format!(
                        "tenants.{}.pipelines: `{p}` already belongs to tenant `{other}`",
                        t.name
                    ));
                }
            }
            for plugin in &t.plugins {
                if Path::new(plugin).file_name() != Some(plugin.as_ref()) {
                    problems.push(format!(
                        "tenants.{}.plugins: `{plugin}` must be a file name in server.plugin_dir",
                        t.name
                    ));
                }
            }
            for entry in &t.http {
                if let Err(e) = crate::plugin::HttpAllow::parse(entry) {
                    problems.push(format!("tenants.{}.http: {e}", t.name));
                }
            }
            if let Some(cpus) = t.cpus
                && !(0.01..=1024.0).contains(&cpus)
            {
                problems.push(format!(
                    "tenants.{}.cpus: must be from 0.01 to 1024 (cores)",
                    t.name
                ));
            }
            if t.cpus.is_some() && self.server.isolation == RunIsolation::Thread {
                problems.push(format!(
                    "tenants.{}.cpus: only runs in processes of their own can be held to it \
                     (server.isolation = \"process\")",
                    t.name
                ));
            }
            t.push.problems(&t.name, &mut problems);
            if t.max_concurrent_runs == 0 {
                problems.push(format!(
                    "tenants.{}.max_concurrent_runs: must be at least 1",
                    t.name
                ));
            }
        }
        problems
    }

    pub fn tenant(&self, name: &str) -> Option<&TenantPolicy> {
        self.tenants.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(server: &str) -> Result<OperatorConfig, OperatorError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("operator.toml");
        let text = format!("[server]\ndata_dir = \"data\"\nplugin_dir = \"plugins\"\n{server}");
        std::fs::write(&path, text).expect("write");
        OperatorConfig::load(&path)
    }

    #[test]
    fn the_servers_limits_have_defaults_and_bounds_each_refused_by_name() {
        let config = load("").expect("defaults");
        let server = &config.server;
        assert_eq!(
            (server.max_connections, server.header_read_timeout),
            (1024, Duration::from_secs(10))
        );
        assert_eq!(
            (
                server.requests_per_second,
                server.request_burst,
                server.keep_runs
            ),
            (50, 100, 1000)
        );
        assert_eq!(server.keep_runs_for, None);
        let error = load(
            "max_connections = 0\nheader_read_timeout = \"0s\"\nbody_read_timeout = \"2h\"\n\
             requests_per_second = 0\nrequest_burst = 2000000\nkeep_runs = 0\nkeep_runs_for = \"0s\"",
        )
        .expect_err("out of bounds");
        let text = error.to_string();
        for name in [
            "server.max_connections: must be from 1 to 1048576",
            "server.header_read_timeout: must be more than zero and at most 1h",
            "server.body_read_timeout: must be more than zero and at most 1h",
            "server.requests_per_second: must be from 1 to 1000000",
            "server.request_burst: must be from 1 to 1000000",
            "server.keep_runs: must be from 1 to 100000000",
            "server.keep_runs_for: must be more than zero and at most 100 years",
        ] {
            assert!(text.contains(name), "`{name}` not in:\n{text}");
        }
    }
}
