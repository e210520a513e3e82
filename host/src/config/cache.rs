//! `[cache]`: the cache the host keeps for plugins (the `cache` interface:
//! embed-text's vectors), so what a service computed once is not asked for
//! again.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[cache]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Whether plugins may keep entries at all. Off: every lookup misses.
    #[serde(default = "CacheConfig::default_enabled")]
    pub enabled: bool,
    /// The SQLite file that keeps the entries, relative to the config; made
    /// when a plugin first uses it. Default `weir-cache.sqlite`. The
    /// processes of a run on one machine (`weir run`, its Kafka-mode
    /// workers reading the same config) share it. Under `weir serve` each
    /// tenant has its own, in the server's `data_dir` (a submitted config
    /// may not name one).
    #[serde(default = "CacheConfig::default_path")]
    pub path: PathBuf,
    /// Most entries kept (default 1,000,000); past it the least recently
    /// used are removed. Under `weir serve`, at most the default.
    #[serde(default = "CacheConfig::default_max_entries")]
    pub max_entries: u64,
    /// Most MiB of keys and values kept (default 1024); past it the least
    /// recently used entries are removed. Under `weir serve`, at most the
    /// default.
    #[serde(default = "CacheConfig::default_max_mib")]
    pub max_mib: u64,
}

/// The most `[cache] max_entries` may be.
pub const MAX_CACHE_ENTRIES: u64 = 100_000_000;
/// The most `[cache] max_mib` may be (64 GiB).
pub const MAX_CACHE_MIB: u64 = 64 << 10;

impl CacheConfig {
    fn default_enabled() -> bool {
        true
    }
    fn default_path() -> PathBuf {
        PathBuf::from("weir-cache.sqlite")
    }
    pub(crate) fn default_max_entries() -> u64 {
        1_000_000
    }
    pub(crate) fn default_max_mib() -> u64 {
        1024
    }

    /// The bound of bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_mib.saturating_mul(1 << 20)
    }

    /// Every problem of these settings: the bounds out of range.
    pub fn problems(&self) -> Vec<crate::config::Problem> {
        let mut out = Vec::new();
        if !(1..=MAX_CACHE_ENTRIES).contains(&self.max_entries) {
            out.push(crate::config::Problem::new(
                "cache.max_entries",
                format!(
                    "{} is out of range: 1 to {MAX_CACHE_ENTRIES} (`enabled = false` turns the cache off)",
                    self.max_entries
                ),
            ));
        }
        if !(1..=MAX_CACHE_MIB).contains(&self.max_mib) {
            out.push(crate::config::Problem::new(
                "cache.max_mib",
                format!(
                    "{} is out of range: 1 to {MAX_CACHE_MIB} (`enabled = false` turns the cache off)",
                    self.max_mib
                ),
            ));
        }
        out
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enabled: Self::default_enabled(),
            path: Self::default_path(),
            max_entries: Self::default_max_entries(),
            max_mib: Self::default_max_mib(),
        }
    }
}
