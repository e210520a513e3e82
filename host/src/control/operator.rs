//! The operator's config for `weir serve`: where it listens and keeps its
//! state, which plugins exist, and what each tenant may do.
//!
//! ```toml
//! [server]
//! addr = "127.0.0.1:8750"
//! data_dir = "serve-data"            # the store of runs, their dead letters
//! plugin_dir = "../plugins/dist"     # the plugins tenants name, by file name
//! admin_token_env = "WEIR_ADMIN_TOKEN"  # optional: sees every tenant's runs
//!
//! [[tenants]]
//! name = "acme"
//! token_env = "WEIR_TOKEN_ACME"      # the tenant's bearer token, from the environment
//! pipelines = ["acme-books"]         # the pipeline names its configs may use
//! plugins = ["file_connector.wasm", "jsonl_indexer.wasm"]
//! dirs = ["/srv/acme"]               # host directories its plugins may be granted
//! http = ["search.acme.internal"]    # hosts its plugins may reach
//! max_concurrent_runs = 2
//! max_docs_per_second = 10000
//! limits = { memory_mib = 128 }      # ceilings (and defaults) for its plugins
//! ```
//!
//! Relative paths are relative to the file. Tokens never sit in the file.

use std::path::{Path, PathBuf};

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
    pub metrics_idle_timeout: std::time::Duration,
    /// Where submitted runs run: `process` (default), each in a process of
    /// its own, so that nothing a run does can take the server or another
    /// run with it; or `thread`, on threads of the server's process.
    #[serde(default)]
    pub isolation: RunIsolation,
    /// The most writable memory a run's process may map, in MiB (default
    /// 4,096): past it the run's allocations fail, and it ends `failure`.
    #[serde(default = "ServerConfig::default_run_memory_mib")]
    pub run_memory_mib: u64,
}

/// `server.isolation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunIsolation {
    #[default]
    Process,
    Thread,
}

impl ServerConfig {
    fn default_addr() -> String {
        "127.0.0.1:8750".into()
    }

    fn default_run_memory_mib() -> u64 {
        4096
    }

    fn default_metrics_idle_timeout() -> std::time::Duration {
        std::time::Duration::from_secs(15 * 60)
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
    /// Hosts its plugins may be granted HTTP to (`host` or `host:port`).
    #[serde(default)]
    pub http: Vec<String>,
    /// Runs going on at once. Default 2.
    #[serde(default = "TenantPolicy::default_max_concurrent_runs")]
    pub max_concurrent_runs: usize,
    /// Documents per second published over all its runs; none by default.
    #[serde(default)]
    pub max_docs_per_second: Option<u32>,
    /// Ceilings on its plugins' limits, which are also their defaults.
    #[serde(default)]
    pub limits: Limits,
}

impl TenantPolicy {
    fn default_max_concurrent_runs() -> usize {
        2
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
