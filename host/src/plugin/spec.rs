//! How a pipeline config describes one plugin: where its component is, its
//! settings, what it may reach, and how much it may use.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::grant::OpenedDir;
use crate::core::document::DocLimits;
use crate::core::limit::Limit;

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
    /// How much the plugin may use. Unset limits come from the plugin's
    /// tenant (`[[tenants]]`), else the defaults.
    #[serde(default)]
    pub limits: Limits,
    /// `reuse` (default): one instance serves document after document and is
    /// replaced only after a trap. `fresh`: a new instance for every document
    /// (stages only), so nothing a document leaves behind reaches the next.
    #[serde(default)]
    pub instance: InstancePolicy,
    /// The SHA-256 of the component file (hex). When set, a file with any
    /// other digest is refused.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// Whether a stage's instance is reused across documents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InstancePolicy {
    #[default]
    Reuse,
    Fresh,
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
            instance: InstancePolicy::default(),
            sha256: None,
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
    /// Databases the plugin may query (the `sql` interface), by the name it
    /// uses for each: a PostgreSQL connection URL
    /// (`postgres://user:password@host:5432/db`, or key=value settings);
    /// give the password through a variable (`"${DATABASE_URL}"`). The
    /// plugin never sees the URL.
    #[serde(default)]
    pub sql: BTreeMap<String, String>,
    /// Kafka topics a streaming connector consumes (the `messages`
    /// interface), by the name it uses for each: brokers, topics and
    /// consumer group (`super::sources::KafkaGrant`).
    #[serde(default)]
    pub kafka: BTreeMap<String, super::sources::KafkaGrant>,
    /// Message queues (RabbitMQ) a streaming connector consumes, by the
    /// name it uses for each: broker URL, queue or topic, and the trigger
    /// rules (`super::QueueGrant`, docs/queue-trigger.md).
    #[serde(default)]
    pub queues: BTreeMap<String, super::QueueGrant>,
    /// Documents pushed to the run over `weir serve`'s API, by the name
    /// the plugin receives them under (`plugin/sources.rs`).
    #[serde(default)]
    pub push: BTreeMap<String, super::sources::PushGrant>,
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
    /// The directory as opened once, at admission or when the plugin is
    /// loaded: every instance is given this handle, never `host` again.
    #[serde(skip)]
    pub opened: Option<OpenedDir>,
}

impl DirGrant {
    /// A grant of `host` as `guest`, not yet opened.
    pub fn new(host: impl Into<PathBuf>, guest: impl Into<String>, writable: bool) -> Self {
        Self {
            host: host.into(),
            guest: guest.into(),
            writable,
            opened: None,
        }
    }

    /// Whether the directory is missing: not opened yet (a grant opened at
    /// admission is not looked up again), and no directory at `host`.
    pub fn is_missing(&self) -> bool {
        self.opened.is_none() && !self.host.is_dir()
    }
}

/// Per-plugin resource limits; each unset one takes its tenant's, else the
/// default (the accessors give the value in force).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most memory one instance may hold, in MiB (default 256): its linear
    /// memory plus the documents it keeps in the host (built, parsed or
    /// copied, and not yet handed over).
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// Longest one call into the plugin may run (a stage's process-document,
    /// an indexer's send-batch, ...) before it is interrupted (default `"30s"`).
    #[serde(default, with = "humantime_serde")]
    pub call_timeout: Option<Duration>,
    /// Longest a connector's `execute` may run (default one day).
    #[serde(default, with = "humantime_serde")]
    pub execute_timeout: Option<Duration>,
    /// Most documents one call may create and hold at once: a stage's
    /// children, a connector's documents not yet published (default
    /// 10,000). Past it the call is stopped.
    #[serde(default)]
    pub max_children: Option<u32>,
    /// Largest document (about its JSON size, children included) a plugin
    /// may build or grow, in MiB (default 16). A connector's budget is per
    /// published document, however many it publishes.
    #[serde(default)]
    pub max_document_mib: Option<u64>,
    /// Deepest nesting of a document's JSON a plugin may build: the
    /// document is level 1, each object or array in it one more, a nested
    /// child two more (default 64, at most 100).
    #[serde(default)]
    pub max_depth: Option<u32>,
    /// Log lines (the `log` interface, stdout, stderr) per second, with bursts
    /// of as many (default 1,000). Lines past it are dropped with a warning;
    /// a stage that writes more than that for a single document (a flood)
    /// fails the document.
    #[serde(default)]
    pub log_lines_per_second: Option<u32>,
    /// Most state a connector keeps between runs, in MiB (default 64): its
    /// keys and values, plus the changes not yet committed. Past it a
    /// change is refused (the `sync` interface).
    #[serde(default)]
    pub max_state_mib: Option<u64>,
}

impl Limits {
    pub fn memory_mib(&self) -> u64 {
        self.memory_mib.unwrap_or(256)
    }
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout.unwrap_or(Duration::from_secs(30))
    }
    pub fn execute_timeout(&self) -> Duration {
        self.execute_timeout
            .unwrap_or(Duration::from_secs(24 * 60 * 60))
    }
    pub fn max_children(&self) -> u32 {
        self.max_children.unwrap_or(10_000)
    }
    pub fn max_document_mib(&self) -> u64 {
        self.max_document_mib.unwrap_or(16)
    }
    pub fn log_lines_per_second(&self) -> u32 {
        self.log_lines_per_second.unwrap_or(1_000)
    }
    pub fn max_depth(&self) -> u32 {
        self.max_depth.unwrap_or(64)
    }
    pub fn max_state_mib(&self) -> u64 {
        self.max_state_mib.unwrap_or(64)
    }

    /// What documents the plugin builds (or is lent) may grow to.
    pub fn doc_limits(&self) -> DocLimits {
        DocLimits {
            max_bytes: self.max_document_bytes(),
            max_depth: usize::try_from(self.max_depth()).unwrap_or(usize::MAX),
        }
    }

    /// The memory cap in bytes.
    pub fn memory_bytes(&self) -> usize {
        mib_to_bytes(self.memory_mib())
    }

    /// The state cap in bytes.
    pub fn max_state_bytes(&self) -> usize {
        mib_to_bytes(self.max_state_mib())
    }

    /// The document size cap in bytes.
    pub fn max_document_bytes(&self) -> usize {
        mib_to_bytes(self.max_document_mib())
    }

    /// These limits, with what they leave unset taken from `defaults`.
    pub fn or(&self, defaults: &Limits) -> Limits {
        Limits {
            memory_mib: self.memory_mib.or(defaults.memory_mib),
            call_timeout: self.call_timeout.or(defaults.call_timeout),
            execute_timeout: self.execute_timeout.or(defaults.execute_timeout),
            max_children: self.max_children.or(defaults.max_children),
            max_document_mib: self.max_document_mib.or(defaults.max_document_mib),
            max_depth: self.max_depth.or(defaults.max_depth),
            log_lines_per_second: self.log_lines_per_second.or(defaults.log_lines_per_second),
            max_state_mib: self.max_state_mib.or(defaults.max_state_mib),
        }
    }
}

impl Limits {
    /// The limits set here that are over those `ceiling` sets, as
    /// `limits.key = value (at most ceiling)`.
    pub fn over(&self, ceiling: &Limits) -> Vec<String> {
        fn check<T: PartialOrd + std::fmt::Debug>(
            out: &mut Vec<String>,
            key: Limit,
            value: Option<T>,
            max: Option<T>,
        ) {
            if let (Some(value), Some(max)) = (value, max)
                && value > max
            {
                out.push(format!("{key} = {value:?} (at most {max:?})"));
            }
        }
        let mut out = Vec::new();
        check(
            &mut out,
            Limit::MemoryMib,
            self.memory_mib,
            ceiling.memory_mib,
        );
        check(
            &mut out,
            Limit::CallTimeout,
            self.call_timeout,
            ceiling.call_timeout,
        );
        check(
            &mut out,
            Limit::ExecuteTimeout,
            self.execute_timeout,
            ceiling.execute_timeout,
        );
        check(
            &mut out,
            Limit::MaxChildren,
            self.max_children,
            ceiling.max_children,
        );
        check(
            &mut out,
            Limit::MaxDocumentMib,
            self.max_document_mib,
            ceiling.max_document_mib,
        );
        check(&mut out, Limit::MaxDepth, self.max_depth, ceiling.max_depth);
        check(
            &mut out,
            Limit::LogLinesPerSecond,
            self.log_lines_per_second,
            ceiling.log_lines_per_second,
        );
        check(
            &mut out,
            Limit::MaxStateMib,
            self.max_state_mib,
            ceiling.max_state_mib,
        );
        out
    }
}

fn mib_to_bytes(mib: u64) -> usize {
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(spec.limits.call_timeout(), Duration::from_millis(250));
        assert_eq!(spec.limits.memory_mib(), 256);
        assert_eq!(spec.instance, InstancePolicy::Reuse);
        let tenant = Limits {
            memory_mib: Some(64),
            call_timeout: Some(Duration::from_secs(1)),
            ..Limits::default()
        };
        let merged = spec.limits.or(&tenant);
        assert_eq!(merged.memory_mib(), 64, "unset: the tenant's");
        assert_eq!(
            merged.call_timeout(),
            Duration::from_millis(250),
            "set: the plugin's"
        );
        assert_eq!(
            merged.max_children(),
            10_000,
            "unset everywhere: the default"
        );
        assert!(!spec.grants.dirs[0].writable);
        assert_eq!(spec.config["field"], "title");
        let unknown = toml::from_str::<PluginSpec>("path = \"x\"\nmemory = 1");
        assert!(unknown.is_err());
    }
}
