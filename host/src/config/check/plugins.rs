//! Each plugin's table: a component file that exists, granted directories
//! that exist at absolute guest paths, limits that can work, a well-formed
//! digest, `grants.sql` URLs that lead to TCP servers only, and fresh
//! instances for stages only.

use super::Found;
use crate::config::{Config, PluginAt, PluginRole, Problem};
use crate::core::limit::Limit;
use crate::plugin::{InstancePolicy, SqlTarget};

/// Connectors and indexers keep state across documents (a crawl, a batch
/// being built): only stages may start afresh for each one.
pub(super) fn check_instances(config: &Config, found: &mut Found) {
    let keep_state = config.plugins().filter(|at| {
        matches!(
            at.role,
            PluginRole::Connector { .. } | PluginRole::Indexer { .. }
        )
    });
    for at in keep_state {
        if at.spec.instance == InstancePolicy::Fresh {
            found.push(Problem::new(
                format!("{}.plugin.instance", at.location),
                "only stages can have a fresh instance per document",
            ));
        }
    }
}

pub(super) fn check_files_and_limits(config: &Config, found: &mut Found) {
    for at in config.plugins() {
        check_files(&at, found);
        check_limits(&at, found);
        check_digest(&at, found);
        check_sql(&at, found);
        check_sources(&at, found);
    }
}

/// Granted sources (`grants.kafka`, ...): each name once across kinds (the
/// plugin receives by name), a Kafka grant with brokers, topics and a group.
fn check_sources(PluginAt { location, spec, .. }: &PluginAt<'_>, found: &mut Found) {
    let mut seen = std::collections::BTreeMap::new();
    for (name, grant) in spec.grants.sources() {
        let at = format!("{location}.plugin.{}.{name}", grant.table());
        if let Some(first) = seen.insert(name, grant.table()) {
            found.push(Problem::new(
                &at,
                format!("source `{name}` is granted in {first} already: each source needs a name of its own"),
            ));
        }
        let empty: Vec<&str> = match grant {
            crate::plugin::SourceGrant::Kafka(kafka) => [
                ("brokers", kafka.brokers.trim().is_empty()),
                (
                    "topics",
                    kafka.topics.iter().any(|t| t.trim().is_empty()) || kafka.topics.is_empty(),
                ),
                ("group", kafka.group.trim().is_empty()),
            ]
            .into_iter()
            .filter_map(|(key, empty)| empty.then_some(key))
            .collect(),
            crate::plugin::SourceGrant::Queue(queue) => {
                found.extend(queue.problems(&at));
                Vec::new()
            }
            crate::plugin::SourceGrant::Push(push) => {
                if !(1..=crate::plugin::PushGrant::MAX_BUFFER).contains(&push.buffer) {
                    found.push(Problem::new(
                        format!("{at}.buffer"),
                        format!("must be 1 to {}", crate::plugin::PushGrant::MAX_BUFFER),
                    ));
                }
                Vec::new()
            }
        };
        for key in empty {
            found.push(Problem::new(format!("{at}.{key}"), "cannot be empty"));
        }
    }
}

/// Each `grants.sql` URL leads to TCP servers only, by its hosts alone (the
/// host refuses the rest when it connects; here it is said before a run).
fn check_sql(PluginAt { location, spec, .. }: &PluginAt<'_>, found: &mut Found) {
    for (name, url) in &spec.grants.sql {
        if let Err(e) = SqlTarget::parse(url) {
            found.push(Problem::new(
                format!("{location}.plugin.grants.sql.{name}"),
                e.to_string(),
            ));
        }
    }
}

fn check_files(PluginAt { location, spec, .. }: &PluginAt<'_>, found: &mut Found) {
    if !spec.path.is_file() {
        found.push(Problem::new(
            format!("{location}.plugin.path"),
            format!("no plugin file at {}", spec.path.display()),
        ));
    }
    for (i, dir) in spec.grants.dirs.iter().enumerate() {
        if dir.is_missing() {
            found.push(Problem::new(
                format!("{location}.plugin.grants.dirs[{i}].host"),
                format!("no directory at {}", dir.host.display()),
            ));
        }
        if !dir.guest.starts_with('/') {
            found.push(Problem::new(
                format!("{location}.plugin.grants.dirs[{i}].guest"),
                format!("`{}` must be an absolute path such as /data", dir.guest),
            ));
        }
    }
}

fn check_limits(PluginAt { location, spec, .. }: &PluginAt<'_>, found: &mut Found) {
    let limits = &spec.limits;
    if limits.memory_mib() == 0 {
        found.push(Problem::new(
            format!("{location}.plugin.{}", Limit::MemoryMib),
            "must be at least 1",
        ));
    }
    for (name, value) in [
        (Limit::MaxChildren, limits.max_children().into()),
        (Limit::MaxDocumentMib, limits.max_document_mib()),
        (
            Limit::LogLinesPerSecond,
            limits.log_lines_per_second().into(),
        ),
    ] {
        if value == 0 {
            found.push(Problem::new(
                format!("{location}.plugin.{name}"),
                "must be at least 1",
            ));
        }
    }
    let max_depth = crate::core::document::DocLimits::MAX_DEPTH;
    if !(1..=max_depth).contains(&(limits.max_depth() as usize)) {
        found.push(Problem::new(
            format!("{location}.plugin.{}", Limit::MaxDepth),
            format!("must be from 1 to {max_depth}"),
        ));
    }
}

fn check_digest(PluginAt { location, spec, .. }: &PluginAt<'_>, found: &mut Found) {
    if let Some(digest) = &spec.sha256
        && (digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        found.push(Problem::new(
            format!("{location}.plugin.sha256"),
            "must be 64 hexadecimal digits (a SHA-256)",
        ));
    }
}
