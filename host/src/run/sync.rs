//! The sync a syncing connector's run belongs to: which state it reads
//! (its [`SyncScope`]), whether the run is a full sync and why, the
//! generation its documents are stamped with, and the sweep that ends a
//! complete full sync.
//!
//! A full sync sends every item the source holds, each stamped with the
//! run's generation. Once all of them are done, and none failed, the host
//! sends the indexer one **sweep marker**: delete what this sync indexed
//! in older generations. So what the source lost while no state knew it
//! (state deleted, a new identity, changed source settings) leaves the
//! index too, and a full sync that did not complete deletes nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::StopReason;
use super::accounting::Accounting;
use super::state::Ledger;
use super::stop::Abort;
use crate::config::ConnectorConfig;
use crate::core::document::Document;
use crate::core::state::{HostPart, StateStores, SyncScope};
use crate::plugin::ConnectorState;

pub use crate::core::sync::{
    GENERATION_FIELD, SOURCE_FIELD, SWEEP_FIELD, SWEEP_SHARE_FIELD, is_sweep,
};

/// Meta key: the fingerprint of the source settings the state was kept for.
pub(crate) const SOURCE_KEY: &str = "source";
/// Meta key: set while a run of the sync goes, removed when one completes:
/// found set, the last run did not end cleanly (killed, failed, stopped),
/// and what it indexed but could not yet keep in the state may be gone
/// from the source without any state knowing it.
const UNCLEAN_KEY: &str = "running";
/// Meta key: the generation of the last full sync that swept.
pub(crate) const GENERATION_KEY: &str = "generation";

/// How often the connector's thread looks whether the documents of a full
/// sync are done, before it sends the sweep.
const DONE_POLL: Duration = Duration::from_millis(10);

/// Why a run is a full sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FullReason {
    /// `weir run --full`.
    Asked,
    /// The connector had no state: a first run, or its state was lost.
    NoState,
    /// The source settings differ from those the state was kept for.
    SourceChanged,
    /// The last run did not end cleanly: documents it indexed may be
    /// unknown to the state.
    Unclean,
}

impl FullReason {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Asked => "asked for (--full)",
            Self::NoState => "no state was kept for this sync (a first run, or the state was lost)",
            Self::Unclean => {
                "the last run of this sync did not end cleanly (what it indexed and could not keep in the state is swept)"
            }
            Self::SourceChanged => {
                "the connector's source settings changed since its state was kept (that state was set aside)"
            }
        }
    }
}

/// The share of a sync's documents a run may delete unless the config
/// says otherwise.
pub const DEFAULT_MAX_DELETE_SHARE: f64 = 0.5;

impl super::Runner {
    /// The largest share of what a sync holds one run may delete:
    /// `[state] max_delete_share`, or 1 with `--allow-deletes` (the
    /// mass-delete guard's share, `run/guard.rs`).
    pub(crate) fn max_delete_share(&self) -> f64 {
        self.delete_share()
    }
}

/// One syncing connector's run of its sync.
pub(crate) struct SyncRun {
    pub(crate) scope: SyncScope,
    /// What this run's documents are stamped with: its start in
    /// milliseconds since the epoch, past every earlier sweep's.
    pub(crate) generation: u64,
    /// Why this run is a full sync; none for an incremental run.
    pub(crate) full: Option<FullReason>,
    /// The scope's name, as documents carry it.
    source: Value,
    /// The largest share of the sync's documents a sweep may delete.
    max_delete_share: f64,
    meta: Ledger,
}

impl std::fmt::Debug for SyncRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncRun")
            .field("scope", &self.scope)
            .field("generation", &self.generation)
            .field("full", &self.full)
            .finish_non_exhaustive()
    }
}

/// What opening a sync gives: the connector's state and the sync.
pub(crate) struct Opened {
    pub(crate) ledger: Ledger,
    pub(crate) sync: SyncRun,
}

/// What a run asks of the syncs it opens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct How {
    /// `weir run --full`.
    pub(crate) full: bool,
    /// The largest share of a sync's documents a sweep may delete.
    pub(crate) max_delete_share: f64,
    /// `[state] track_source`.
    pub(crate) track_source: bool,
    /// The run is resumed (Kafka mode): it carries on an earlier runner's.
    pub(crate) resuming: bool,
}

/// Open the sync of connector `c` under `id`: its meta and its state (set
/// aside when the source settings changed), and decide whether the run
/// is a full sync.
pub(crate) fn open(
    states: &dyn StateStores,
    id: Option<&str>,
    c: &ConnectorConfig,
    accounting: &Arc<Accounting>,
    how: How,
) -> Result<Opened, StopReason> {
    let How {
        full: asked_full,
        max_delete_share,
        track_source,
        resuming,
    } = how;
    let scope = SyncScope::new(id, &c.pipeline, &c.name);
    let unreadable = |e: crate::core::state::StateError| {
        StopReason::from(format!(
            "the connector's state ({}, sync `{scope}`) cannot be read: {e}",
            states.describe(&c.pipeline)
        ))
    };
    let limit = c.plugin.limits.max_state_bytes();
    let meta_store = states
        .open(&c.pipeline, &scope.part(HostPart::Meta).within_pipeline())
        .map_err(unreadable)?;
    let meta =
        Ledger::load(meta_store, Arc::clone(accounting), limit, false).map_err(unreadable)?;
    let fingerprint = source_fingerprint(c);
    let store = states
        .open(&c.pipeline, &scope.within_pipeline())
        .map_err(unreadable)?;
    let changed = meta.get(SOURCE_KEY).is_some_and(|kept| kept != fingerprint);
    if changed && !track_source {
        tracing::warn!(
            sync = %scope,
            "the connector's source settings changed since its state was kept; with [state] track_source = false it goes on from that state"
        );
    }
    let changed = changed && track_source;
    // A resumed run carries on the run that left the mark: it is that run,
    // not a new one after it (and it does not send everything again, so a
    // sweep after it would delete what the earlier runner sent).
    let unclean = meta.get(UNCLEAN_KEY).is_some() && !resuming;
    // The connector sees `full_sync()` when asked, and after a run that did
    // not end cleanly (its sweep needs every item sent again); with no
    // state (none kept, or set aside) everything is new to it anyway.
    let tell_full = asked_full || unclean;
    let ledger = if changed {
        // Never diffed against another source's state: it is set aside
        // (cleared once this run commits, not before), and the full sync's
        // sweep removes what that source indexed.
        Ledger::set_aside(store, Arc::clone(accounting), limit, tell_full)
    } else {
        Ledger::load(store, Arc::clone(accounting), limit, tell_full).map_err(unreadable)?
    };
    let full = if resuming {
        // What the earlier runner sent carries its generation: no sweep.
        None
    } else if changed {
        Some(FullReason::SourceChanged)
    } else if asked_full {
        Some(FullReason::Asked)
    } else if ledger.size().0 == 0 {
        Some(FullReason::NoState)
    } else if unclean {
        Some(FullReason::Unclean)
    } else {
        None
    };
    let kept_generation = meta
        .get(GENERATION_KEY)
        .and_then(|g| g.parse::<u64>().ok())
        .unwrap_or(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let generation = now.max(kept_generation.saturating_add(1));
    meta.change(SOURCE_KEY, Some(&fingerprint))
        .map_err(StopReason::from)?;
    meta.change(UNCLEAN_KEY, Some(&generation.to_string()))
        .map_err(StopReason::from)?;
    if !changed {
        // Known at once (a first run's too): a run cut short after this
        // point is not taken for a change of source next time. A changed
        // source is kept only once the state set aside is gone.
        meta.commit().map_err(unreadable)?;
    }
    accounting.note_sync(match full {
        Some(reason) => format!("full sync: {}", reason.describe()),
        None => "incremental sync".to_owned(),
    });
    match full {
        Some(FullReason::NoState) => tracing::info!(
            sync = %scope,
            generation,
            "full sync: {}",
            FullReason::NoState.describe()
        ),
        Some(reason @ (FullReason::Unclean | FullReason::SourceChanged)) => tracing::warn!(
            sync = %scope,
            generation,
            "full sync: {}; when every document is done, what this sync indexed before and the source no longer holds is deleted",
            reason.describe()
        ),
        Some(FullReason::Asked) => {
            tracing::info!(sync = %scope, generation, "full sync: asked for (--full)")
        }
        None => tracing::debug!(sync = %scope, generation, "incremental sync"),
    }
    Ok(Opened {
        ledger,
        sync: SyncRun {
            source: Value::String(scope.name()),
            scope,
            generation,
            full,
            max_delete_share: max_delete_share.clamp(0.0, 1.0),
            meta,
        },
    })
}

/// SHA-256 of what says which source a connector reads: its plugin's
/// config, canonical (keys sorted), the host folders it is granted, the
/// HTTP hosts and the databases (without passwords) it may reach.
/// Secrets in granted variables are left out: a rotated key is the same
/// source.
pub(crate) fn source_fingerprint(c: &ConnectorConfig) -> String {
    let grants = &c.plugin.grants;
    let dirs: Vec<Value> = grants
        .dirs
        .iter()
        .map(|d| Value::from(format!("{}={}", d.host.display(), d.guest)))
        .collect();
    let sql: serde_json::Map<String, Value> = grants
        .sql
        .iter()
        .map(|(name, url)| {
            // As the connection reads it: where and as whom, never the
            // password (a URL the parser refuses is refused at validation).
            let target = crate::plugin::SqlTarget::parse(url).map(|t| t.identity());
            (name.clone(), Value::from(target.unwrap_or_default()))
        })
        .collect();
    let settings = serde_json::json!({
        "config": canonical(&source_settings(&c.plugin.config)),
        "dirs": dirs,
        "http": grants.http,
        "sql": sql,
    });
    hex::encode(Sha256::digest(settings.to_string()))
}

/// A connector's settings without those that only bound or pace a run
/// (`max_*`, `min_*`, timeouts, retries, page and batch sizes,
/// concurrency, delays, rates, what to delete, the user agent): a crawl
/// given a lower `max_pages` reads the same site, and is not a new source.
fn source_settings(config: &Value) -> Value {
    let Value::Object(map) = config else {
        return config.clone();
    };
    const PACING: [&str; 10] = [
        "delete",
        "user_agent",
        "timeout",
        "retr",
        "concurren",
        "batch",
        "page_size",
        "delay",
        "interval",
        "rate",
    ];
    Value::Object(
        map.iter()
            .filter(|(k, _)| {
                let k = k.to_ascii_lowercase();
                !(k.starts_with("max_")
                    || k.starts_with("min_")
                    || PACING.iter().any(|p| k.contains(p)))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// `value` with every object's keys in order.
pub(crate) fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

impl SyncRun {
    /// Mark `doc`, published by the connector, as this sync's, of this
    /// run's generation (a deletion marker is left as it is).
    pub(crate) fn stamp(&self, doc: &mut Document) {
        if doc.is_deleted() {
            return;
        }
        // Neither name is reserved, and both values are small: cannot fail.
        let _ = doc.replace(SOURCE_FIELD, self.source.clone());
        let _ = doc.replace(GENERATION_FIELD, Value::from(self.generation));
    }

    /// After a full sync's `execute`: wait until every document is done,
    /// then, when none failed, send the sweep marker through `sink`. Only
    /// from the connector's thread; ends early (no sweep) when the run
    /// aborts or is interrupted.
    pub(crate) fn sweep_after(
        &self,
        sink: &mut dyn crate::plugin::PublishSink,
        accounting: &Accounting,
        abort: &Abort,
        interrupt: &super::Interrupt,
        run_id: &str,
        state: Option<&Ledger>,
    ) -> Result<(), String> {
        let Some(reason) = self.full else {
            return Ok(());
        };
        // A connector that found no state and keeps none (none made) is
        // not syncing this source: nothing to sweep, and nothing to say in
        // the summary (it reads its source whole every run, as configured).
        // (One whose source emptied would have its sweep refused by the
        // share.) Asked for (`--full`, a rebuild), the sweep goes all the same.
        if reason == FullReason::NoState && state.is_none_or(|s| s.size().0 == 0) {
            accounting.forget_sync();
            return Ok(());
        }
        while accounting.pending() > 0 {
            if abort.is_set() || interrupt.is_set() {
                accounting.note_sync(format!(
                    "full sync: {}; not swept: the run did not complete",
                    reason.describe()
                ));
                return Ok(());
            }
            std::thread::sleep(DONE_POLL);
        }
        // A connector that does not send everything on a full sync (it
        // ignores `full_sync()`) would have its unchanged items swept: one
        // that sent fewer than half as many documents as its state holds
        // keys is not swept. (Connectors keep a key per item, a few of
        // their own, or a cursor: a real full sync sends about as many.)
        let sent = Accounting::get(&accounting.published)
            .saturating_sub(Accounting::get(&accounting.deleted));
        let keys = state.map_or(0, |s| s.size().0);
        if sent.saturating_mul(2) < keys {
            accounting.note_sync(format!(
                "full sync: {}; not swept: the connector sent {sent} documents for the {keys} keys of its state (does it send everything on a full sync?)",
                reason.describe()
            ));
            tracing::warn!(
                sync = %self.scope,
                sent,
                keys,
                "full sync not swept: the connector sent fewer than half as many documents as its state holds keys, so it may not send everything on a full sync (what the source no longer holds may stay in the index)"
            );
            return Ok(());
        }
        let failed = Accounting::get(&accounting.failed);
        if failed > 0 {
            accounting.note_sync(format!(
                "full sync: {}; not swept: {failed} documents failed",
                reason.describe()
            ));
            tracing::warn!(
                sync = %self.scope,
                failed,
                "full sync: {failed} documents failed, so nothing is swept (what the source no longer holds may stay in the index until a full sync with no failures)"
            );
            return Ok(());
        }
        let mut marker = Document::new(format!(
            "{}{}",
            crate::core::sync::SWEEP_ID_PREFIX,
            self.scope
        ));
        marker.set_run_id(Some(run_id.to_owned()));
        marker.set_skip_stages(true);
        // Plain small values: cannot fail.
        let _ = marker.set(SWEEP_FIELD, Value::Bool(true));
        let _ = marker.set(SOURCE_FIELD, self.source.clone());
        let _ = marker.set(GENERATION_FIELD, Value::from(self.generation));
        let _ = marker.set(SWEEP_SHARE_FIELD, Value::from(self.max_delete_share));
        tracing::info!(
            sync = %self.scope,
            generation = self.generation,
            reason = reason.describe(),
            "full sync complete: the indexer deletes what this sync indexed in older generations"
        );
        sink.publish(marker, Instant::now() + Duration::from_secs(60))?;
        accounting.note_sync(format!(
            "full sync: {}; sweep sent (what this sync indexed before and the source no longer holds is deleted)",
            reason.describe()
        ));
        // Kept once the sweep is done: the next generation is past it.
        self.meta
            .change(GENERATION_KEY, Some(&self.generation.to_string()))
    }

    /// Keep what the sync's own facts allow, as the run ends: once the
    /// connector's state set aside (a changed source) is gone, never
    /// before, so a run that fails first finds the change again.
    pub(crate) fn commit(
        &self,
        ledger: &Ledger,
        complete: bool,
    ) -> Result<(), crate::core::state::StateError> {
        if ledger.reset_pending() {
            return Ok(());
        }
        if complete {
            // Ended cleanly: the next run need not be a full one. Kept
            // once every document before it is done, as it is now.
            self.meta
                .change(UNCLEAN_KEY, None)
                .map_err(crate::core::state::StateError::new)?;
        }
        self.meta.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_part_of_the_source() {
        let identity = |url: &str| crate::plugin::SqlTarget::parse(url).map(|t| t.identity());
        assert_eq!(
            identity("postgres://app:s3cret@db.local:5432/items"),
            identity("postgres://app:other@db.local:5432/items")
        );
        assert_eq!(
            identity("host=db user=app password=s3cret dbname=items"),
            identity("host=db user=app password=other dbname=items")
        );
        assert_ne!(
            identity("postgres://app:s3cret@db.local:5432/items"),
            identity("postgres://app:s3cret@db.local:5432/other")
        );
    }

    #[test]
    fn limits_and_pacing_are_not_the_source() {
        let a: Value = serde_json::json!({"seeds": ["http://s/"], "max_pages": 100, "page_size": 5, "request_timeout": "5s"});
        let b: Value = serde_json::json!({"seeds": ["http://s/"], "max_pages": 2});
        let c: Value = serde_json::json!({"seeds": ["http://t/"], "max_pages": 2});
        let key = |v: &Value| canonical(&source_settings(v)).to_string();
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&b), key(&c));
    }

    #[test]
    fn key_order_does_not_change_the_source() {
        let a: Value = serde_json::json!({"paths": ["/d"], "opts": {"x": 1, "y": 2}});
        let b: Value = serde_json::json!({"opts": {"y": 2, "x": 1}, "paths": ["/d"]});
        assert_eq!(canonical(&a).to_string(), canonical(&b).to_string());
    }
}
