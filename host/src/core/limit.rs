//! The limits Weir holds a plugin to, by name: each one's key in a
//! plugin's `limits` table and its label on the limit metrics. An error
//! that stops a call at a limit carries the [`Limit`]; the metric label is
//! read from it, never from the error's message, so rewording a message
//! cannot change a label.

use std::fmt;

/// One limit a plugin instance is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// `limits.memory_mib`: linear memory plus documents held in the host.
    MemoryMib,
    /// `limits.call_timeout`: how long one call may run.
    CallTimeout,
    /// `limits.execute_timeout`: how long a connector's `execute` may run.
    ExecuteTimeout,
    /// `limits.max_children`: documents one call may create and hold.
    MaxChildren,
    /// `limits.max_document_mib`: the largest document a plugin may build.
    MaxDocumentMib,
    /// `limits.max_depth`: the deepest nesting of a document's JSON.
    MaxDepth,
    /// `limits.log_lines_per_second`: the plugin's log rate.
    LogLinesPerSecond,
    /// `limits.max_state_mib`: the most a connector's state holds in the
    /// host, its pending changes counted (one check, `core::state`).
    MaxStateMib,
    /// Non-document handles open at once (files, streams, HTTP requests,
    /// SQL rows): fixed by the host, not a config key.
    Handles,
    /// Bytes of SQL the host takes in at once (a page or row of 64 MiB, a
    /// statement of 1 MiB): fixed by the host, not a config key.
    SqlBytes,
    /// `[cache] max_entries`: entries the host's cache keeps for a tenant;
    /// past it the least recently used are removed.
    CacheEntries,
    /// `[cache] max_mib`, and the 1 MiB of one value: bytes the host's
    /// cache keeps for a tenant; past it the least recently used entries
    /// are removed, and a value over 1 MiB is not kept.
    CacheBytes,
    /// A tenant's `push.max_body_mib` (operator's file): the largest body
    /// of documents pushed to a run (`weir serve`).
    PushBodyMib,
    /// A tenant's `push.lines_per_second` (and `push.burst`): documents
    /// pushed to its runs, all together.
    PushLinesPerSecond,
    /// A tenant's `push.max_buffer`: the most a run's `grants.push`
    /// buffer may hold.
    PushBuffer,
}

impl Limit {
    /// Every limit.
    pub const ALL: [Limit; 15] = [
        Limit::MemoryMib,
        Limit::CallTimeout,
        Limit::ExecuteTimeout,
        Limit::MaxChildren,
        Limit::MaxDocumentMib,
        Limit::MaxDepth,
        Limit::LogLinesPerSecond,
        Limit::MaxStateMib,
        Limit::Handles,
        Limit::SqlBytes,
        Limit::CacheEntries,
        Limit::CacheBytes,
        Limit::PushBodyMib,
        Limit::PushLinesPerSecond,
        Limit::PushBuffer,
    ];

    /// Its key in a plugin's `limits` table (`memory_mib`), if the config
    /// sets it.
    pub const fn key(self) -> Option<&'static str> {
        Some(match self {
            Limit::MemoryMib => "memory_mib",
            Limit::CallTimeout => "call_timeout",
            Limit::ExecuteTimeout => "execute_timeout",
            Limit::MaxChildren => "max_children",
            Limit::MaxDocumentMib => "max_document_mib",
            Limit::MaxDepth => "max_depth",
            Limit::LogLinesPerSecond => "log_lines_per_second",
            Limit::MaxStateMib => "max_state_mib",
            Limit::Handles
            | Limit::SqlBytes
            | Limit::CacheEntries
            | Limit::CacheBytes
            | Limit::PushBodyMib
            | Limit::PushLinesPerSecond
            | Limit::PushBuffer => {
                return None;
            }
        })
    }

    /// Its key in a tenant's table of the operator's file
    /// (`push.max_body_mib`), for a tenant's bound.
    pub const fn policy_key(self) -> Option<&'static str> {
        match self {
            Limit::PushBodyMib => Some("push.max_body_mib"),
            Limit::PushLinesPerSecond => Some("push.lines_per_second"),
            Limit::PushBuffer => Some("push.max_buffer"),
            _ => None,
        }
    }

    /// Its config key as messages name it (`limits.memory_mib`), if the
    /// config sets it.
    pub const fn config_key(self) -> Option<&'static str> {
        Some(match self {
            Limit::MemoryMib => "limits.memory_mib",
            Limit::CallTimeout => "limits.call_timeout",
            Limit::ExecuteTimeout => "limits.execute_timeout",
            Limit::MaxChildren => "limits.max_children",
            Limit::MaxDocumentMib => "limits.max_document_mib",
            Limit::MaxDepth => "limits.max_depth",
            Limit::LogLinesPerSecond => "limits.log_lines_per_second",
            Limit::MaxStateMib => "limits.max_state_mib",
            Limit::Handles
            | Limit::SqlBytes
            | Limit::CacheEntries
            | Limit::CacheBytes
            | Limit::PushBodyMib
            | Limit::PushLinesPerSecond
            | Limit::PushBuffer => {
                return None;
            }
        })
    }

    /// Its config key, for a limit the config sets: for keys known at
    /// compile time (`const`), where naming another limit fails the build.
    pub const fn set_by_config(self) -> &'static str {
        match self.config_key() {
            Some(key) => key,
            None => panic!("a limit the config does not set has no key"),
        }
    }

    /// Its `limit` label on the limit metrics: the config key without its
    /// table, or `handles`, `sql_bytes`, `cache_entries`, `cache_bytes`.
    pub fn label(self) -> &'static str {
        match self {
            Limit::SqlBytes => "sql_bytes",
            Limit::CacheEntries => "cache_entries",
            Limit::CacheBytes => "cache_bytes",
            Limit::PushBodyMib => "push_body_mib",
            Limit::PushLinesPerSecond => "push_lines_per_second",
            Limit::PushBuffer => "push_buffer",
            other => other.key().unwrap_or("handles"),
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            self.config_key()
                .or(self.policy_key())
                .unwrap_or(self.label()),
        )
    }
}

/// A host call refused to go past `limit`, saying why in `message`.
///
/// It reads as its message (it derefs to it), so `hit.contains("...")`
/// and `{hit}` see the text a user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHit {
    pub limit: Limit,
    pub message: String,
}

impl LimitHit {
    pub fn new(limit: Limit, message: impl Into<String>) -> Self {
        Self {
            limit,
            message: message.into(),
        }
    }
}

impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::ops::Deref for LimitHit {
    type Target = str;

    fn deref(&self) -> &str {
        &self.message
    }
}

#[cfg(test)]
mod tests {
    use super::Limit;

    #[test]
    fn keys_and_labels_agree() {
        for limit in Limit::ALL {
            match (limit.key(), limit.config_key()) {
                (Some(key), Some(config_key)) => {
                    assert_eq!(config_key, format!("limits.{key}"));
                    assert_eq!(limit.label(), key);
                }
                // Not a plugin's limit: a host bound, or a tenant's bound
                // in the operator's file, keyed there.
                (None, None) => match limit.policy_key() {
                    Some(policy_key) => assert_eq!(
                        policy_key.replace('.', "_").replace("max_", ""),
                        limit.label()
                    ),
                    None => assert!(
                        ["handles", "sql_bytes", "cache_entries", "cache_bytes"]
                            .contains(&limit.label())
                    ),
                },
                other => panic!("{limit:?}: {other:?}"),
            }
        }
    }
}
