//! The host side of the `cache` interface (contract 0.2.2, world
//! `caching-stage`): bytes by key, kept for a tenant in a SQLite file
//! ([`store`]), bounded, shared by the processes of a run.
//!
//! The cache is never needed: one that cannot be used (none configured, a
//! file that is no database, a write another process holds too long, a full
//! disk) answers misses and keeps nothing, with a warning, and the plugin
//! computes what it would have found. A file found broken is not tried
//! again by this process.

mod store;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use store::HostCacheOptions;
use store::{Store, StoreError};

use super::{PluginState, Wasm};
use crate::core::limit::Limit;
use crate::plugin::bindings::caching_stage::weir::plugin::cache;
use crate::telemetry::events::CacheFailed;

/// Longest key, in bytes.
pub const MAX_CACHE_KEY_BYTES: usize = 256;
/// Largest value, in bytes.
pub const MAX_CACHE_VALUE_BYTES: usize = 1 << 20;
/// Most keys (or entries) one call takes.
pub const MAX_CACHE_CALL_ENTRIES: usize = 4096;
/// Most bytes of values one `get` answers.
pub const MAX_CACHE_ANSWER_BYTES: usize = 64 << 20;

/// After a warning, how long later failures are only counted.
const WARN_EVERY: Duration = Duration::from_secs(60);

enum Opened {
    /// Not used yet: the file is made by the first call.
    NotYet,
    Open(Store),
    /// Found broken: calls answer misses without trying it again.
    Broken,
}

/// One tenant's cache, shared by every plugin instance of a process (the
/// plugin runtime holds it).
pub struct HostCache {
    options: HostCacheOptions,
    db: Mutex<Opened>,
    /// When a failure was last logged.
    warned: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for HostCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostCache")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Who calls, for the log and the metrics.
#[derive(Clone, Copy)]
struct Caller<'a> {
    plugin: &'a str,
    tenant: Option<&'a str>,
}

impl HostCache {
    /// A cache in `options.path`, opened when first used.
    pub fn new(options: HostCacheOptions) -> Self {
        Self {
            options,
            db: Mutex::new(Opened::NotYet),
            warned: Mutex::new(None),
        }
    }

    pub fn options(&self) -> &HostCacheOptions {
        &self.options
    }

    /// Run `f` on the open store; none (after saying why) when the cache
    /// cannot be used.
    fn with_store<T>(
        &self,
        who: Caller<'_>,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError>,
    ) -> Option<T> {
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*db, Opened::NotYet) {
            *db = match Store::open(&self.options.path) {
                Ok(store) => Opened::Open(store),
                Err(e) => {
                    self.failed(who, &e);
                    // A file that cannot be opened now may be made later
                    // (a directory created, a lock let go): tried again
                    // by the next call unless it is no database at all.
                    if e.broken {
                        Opened::Broken
                    } else {
                        Opened::NotYet
                    }
                }
            };
        }
        let Opened::Open(store) = &mut *db else {
            if matches!(*db, Opened::Broken) {
                crate::telemetry::meters::cache_failed(who.plugin, who.tenant);
            }
            return None;
        };
        match f(store) {
            Ok(out) => Some(out),
            Err(e) => {
                self.failed(who, &e);
                if e.broken {
                    *db = Opened::Broken;
                }
                None
            }
        }
    }

    fn failed(&self, who: Caller<'_>, e: &StoreError) {
        let warn = {
            let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
            let due = warned.is_none_or(|at| at.elapsed() >= WARN_EVERY);
            if due {
                *warned = Some(Instant::now());
            }
            due
        };
        CacheFailed {
            plugin: who.plugin,
            tenant: who.tenant,
            path: &self.options.path,
            error: &e.message,
            warn,
        }
        .emit();
    }

    fn get(&self, who: Caller<'_>, keys: &[String]) -> Vec<Option<Vec<u8>>> {
        let asked = &keys[..keys.len().min(MAX_CACHE_CALL_ENTRIES)];
        let mut found = self
            .with_store(who, |store| {
                store.get(asked, now_millis(), MAX_CACHE_ANSWER_BYTES)
            })
            .unwrap_or_default();
        let hits = found.iter().filter(|v| v.is_some()).count() as u64;
        crate::telemetry::meters::cache_lookups(
            who.plugin,
            who.tenant,
            hits,
            keys.len() as u64 - hits,
        );
        found.resize(keys.len(), None);
        found
    }

    fn put(&self, who: Caller<'_>, entries: &[(String, Vec<u8>)]) -> u32 {
        let fits = |(key, value): &&(String, Vec<u8>)| {
            (1..=MAX_CACHE_KEY_BYTES).contains(&key.len()) && value.len() <= MAX_CACHE_VALUE_BYTES
        };
        let taken: Vec<(&str, &[u8])> = entries
            .iter()
            .take(MAX_CACHE_CALL_ENTRIES)
            .filter(fits)
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        if entries
            .iter()
            .take(MAX_CACHE_CALL_ENTRIES)
            .any(|e| e.1.len() > MAX_CACHE_VALUE_BYTES)
        {
            crate::telemetry::meters::limit_hit(who.plugin, who.tenant, Limit::CacheBytes);
        }
        if taken.is_empty() {
            return 0;
        }
        let (max_entries, max_bytes) = (self.options.max_entries, self.options.max_bytes);
        let Some(evicted) = self.with_store(who, |store| {
            store.put(&taken, now_millis(), max_entries, max_bytes)
        }) else {
            return 0;
        };
        for (hit, limit) in [
            (evicted.by_entries, Limit::CacheEntries),
            (evicted.by_bytes, Limit::CacheBytes),
        ] {
            if hit {
                crate::telemetry::meters::limit_hit(who.plugin, who.tenant, limit);
            }
        }
        if evicted.entries > 0 {
            tracing::debug!(
                plugin = %who.plugin,
                evicted = evicted.entries,
                max_entries,
                max_bytes,
                "cache over its bounds: least recently used entries removed"
            );
        }
        u32::try_from(taken.len()).unwrap_or(u32::MAX)
    }
}

/// Milliseconds since the epoch: when an entry was last used.
fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The cache an instance reaches, and who it is for the metrics.
#[derive(Clone, Default)]
pub(crate) struct CacheAccess {
    pub(crate) cache: Option<Arc<HostCache>>,
    pub(crate) tenant: Option<Arc<str>>,
}

impl cache::Host for PluginState {
    fn get(&mut self, keys: Vec<String>) -> Wasm<Vec<Option<Vec<u8>>>> {
        let who = Caller {
            plugin: &self.plugin,
            tenant: self.cache.tenant.as_deref(),
        };
        Ok(match &self.cache.cache {
            Some(cache) => cache.get(who, &keys),
            None => vec![None; keys.len()],
        })
    }

    fn put(&mut self, entries: Vec<(String, Vec<u8>)>) -> Wasm<u32> {
        let who = Caller {
            plugin: &self.plugin,
            tenant: self.cache.tenant.as_deref(),
        };
        Ok(match &self.cache.cache {
            Some(cache) => cache.put(who, &entries),
            None => 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &std::path::Path, max_entries: u64) -> HostCache {
        HostCache::new(HostCacheOptions {
            path: dir.join("cache.sqlite"),
            max_entries,
            max_bytes: 1 << 20,
        })
    }

    const WHO: Caller<'static> = Caller {
        plugin: "embed",
        tenant: None,
    };

    #[test]
    fn entries_over_their_sizes_are_not_kept_and_the_rest_are() {
        let dir = tempfile::tempdir().expect("dir");
        let c = cache(dir.path(), 10);
        let long_key = "k".repeat(MAX_CACHE_KEY_BYTES + 1);
        let kept = c.put(
            WHO,
            &[
                ("a".into(), b"1".to_vec()),
                (String::new(), b"2".to_vec()),
                (long_key, b"3".to_vec()),
                ("big".into(), vec![0; MAX_CACHE_VALUE_BYTES + 1]),
            ],
        );
        assert_eq!(kept, 1);
        let got = c.get(WHO, &["a".into(), "big".into()]);
        assert_eq!(got, vec![Some(b"1".to_vec()), None]);
    }

    #[test]
    fn a_broken_file_answers_misses_and_keeps_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("cache.sqlite"), vec![b'x'; 8192]).expect("write");
        let c = cache(dir.path(), 10);
        assert_eq!(c.put(WHO, &[("a".into(), b"1".to_vec())]), 0);
        assert_eq!(c.get(WHO, &["a".into()]), vec![None]);
        assert!(matches!(*c.db.lock().expect("lock"), Opened::Broken));
    }

    #[test]
    fn a_cache_whose_directory_cannot_be_made_is_tried_again() {
        let dir = tempfile::tempdir().expect("dir");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"not a directory").expect("write");
        let c = HostCache::new(HostCacheOptions {
            path: blocker.join("cache.sqlite"),
            max_entries: 10,
            max_bytes: 1 << 20,
        });
        assert_eq!(c.put(WHO, &[("a".into(), b"1".to_vec())]), 0);
        std::fs::remove_file(&blocker).expect("remove");
        assert_eq!(c.put(WHO, &[("a".into(), b"1".to_vec())]), 1);
        assert_eq!(c.get(WHO, &["a".into()]), vec![Some(b"1".to_vec())]);
    }
}
