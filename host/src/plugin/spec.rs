//! How a pipeline config describes one plugin: where its component is, its
//! settings, what it may reach, and how much it may use.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One plugin as the config names it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// Path to the WebAssembly component (`.wasm`), relative to the config file.
    pub path: PathBuf,
    /// The plugin's own settings, handed to it as JSON. The plugin checks them
    /// (`check-config`) before any run starts.
    #[serde(default = "empty_object")]
    pub config: serde_json::Value,
    /// What the plugin may reach outside its sandbox. Nothing by default.
    #[serde(default)]
    pub grants: Grants,
    /// How much the plugin may use.
    #[serde(default)]
    pub limits: Limits,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl PluginSpec {
    /// A spec with default grants (none) and limits.
    pub fn new(path: impl Into<PathBuf>, config: serde_json::Value) -> Self {
        Self {
            path: path.into(),
            config,
            grants: Grants::default(),
            limits: Limits::default(),
        }
    }
}

/// WASI capabilities granted to a plugin. Everything not listed is denied:
/// no files, no environment variables, no network.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Host directories the plugin may open, each under a path of its own.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// Environment variables the plugin sees, by name and value.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Hosts the plugin may send HTTP requests to (`wasi:http`), as `host`
    /// (any port) or `host:port`. Redirects are not followed by the host; each
    /// hop is a new request checked against this list.
    #[serde(default)]
    pub http: Vec<String>,
}

/// A host directory made visible to a plugin.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The directory on the host, relative to the config file.
    pub host: PathBuf,
    /// Where the plugin sees it, e.g. `/data`.
    pub guest: String,
    /// Whether the plugin may create, write and delete files there.
    #[serde(default)]
    pub writable: bool,
}

/// Per-plugin resource limits.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most linear memory one instance may hold, in MiB.
    #[serde(default = "Limits::default_memory_mib")]
    pub memory_mib: u64,
    /// Longest one call into the plugin may run (a stage's process-document,
    /// an indexer's send-batch, ...) before it is interrupted, e.g. `"30s"`.
    #[serde(default = "Limits::default_call_timeout", with = "humantime_serde")]
    pub call_timeout: Duration,
    /// Longest a connector's `execute` may run. Defaults to one day.
    #[serde(default = "Limits::default_execute_timeout", with = "humantime_serde")]
    pub execute_timeout: Duration,
}

impl Limits {
    fn default_memory_mib() -> u64 {
        256
    }
    fn default_call_timeout() -> Duration {
        Duration::from_secs(30)
    }
    fn default_execute_timeout() -> Duration {
        Duration::from_secs(24 * 60 * 60)
    }

    /// The memory cap in bytes.
    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mib: Self::default_memory_mib(),
            call_timeout: Self::default_call_timeout(),
            execute_timeout: Self::default_execute_timeout(),
        }
    }
}

/// One allow-listed HTTP destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpAllow {
    host: String,
    port: Option<u16>,
}

impl HttpAllow {
    /// Parse `host` or `host:port`.
    pub(crate) fn parse(entry: &str) -> Result<Self, String> {
        let entry = entry.trim();
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') || host.starts_with('[') => {
                let port = port
                    .parse()
                    .map_err(|_| format!("`{entry}`: `{port}` is not a port number"))?;
                (host, Some(port))
            }
            _ => (entry, None),
        };
        if host.is_empty() || host.contains('/') {
            return Err(format!(
                "`{entry}` is not a host name (write `host` or `host:port`)"
            ));
        }
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    pub(crate) fn allows(&self, host: &str, port: u16) -> bool {
        self.host.eq_ignore_ascii_case(host) && self.port.is_none_or(|p| p == port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_allow_entries() {
        let any_port = HttpAllow::parse("Search.Local").expect("valid");
        assert!(any_port.allows("search.local", 9200));
        assert!(!any_port.allows("other.local", 9200));
        let one_port = HttpAllow::parse("127.0.0.1:9200").expect("valid");
        assert!(one_port.allows("127.0.0.1", 9200));
        assert!(!one_port.allows("127.0.0.1", 9201));
        assert!(HttpAllow::parse("http://x").is_err());
        assert!(HttpAllow::parse("x:notaport").is_err());
        assert!(HttpAllow::parse("").is_err());
    }

    #[test]
    fn spec_from_toml_with_defaults_and_durations() {
        let spec: PluginSpec = toml::from_str(
            r#"
            path = "stage.wasm"
            config = { field = "title" }
            limits = { call_timeout = "250ms" }
            grants = { http = ["localhost:9200"], dirs = [{ host = "data", guest = "/data" }] }
            "#,
        )
        .expect("valid spec");
        assert_eq!(spec.limits.call_timeout, Duration::from_millis(250));
        assert_eq!(spec.limits.memory_mib, 256);
        assert!(!spec.grants.dirs[0].writable);
        assert_eq!(spec.config["field"], "title");
        let unknown = toml::from_str::<PluginSpec>("path = \"x\"\nmemory = 1");
        assert!(unknown.is_err());
    }
}
