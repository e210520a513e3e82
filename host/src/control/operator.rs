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
//! http = ["search.acme.internal", "10.20.0.0/16:9200"]  # hosts, and the private addresses they are at
//! max_concurrent_runs = 2
//! max_docs_per_second = 10000
//! limits = { memory_mib = 128 }      # ceilings (and defaults) for its plugins
//! ```
//!
//! Relative paths are relative to the file. Tokens never sit in the file.

use std::path::{Path, PathBuf};

use serde::Deserialize;

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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    pub server: ServerConfig,
    #[serde(default)]
    pub tenants: Vec<TenantPolicy>,
}

/// `[server]`
#[derive(Debug, Clone, Deserialize)]
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
}

impl ServerConfig {
    fn default_addr() -> String {
        "127.0.0.1:8750".into()
    }
}

/// `[[tenants]]`: what one tenant may do.
#[derive(Debug, Clone, Deserialize)]
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
