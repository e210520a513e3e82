//! What a config's syncs keep, and clearing it: `weir state show|reset`,
//! and the same for a tenant's run under `weir serve`.
//!
//! A syncing connector's state is three scopes of its store: its own keys
//! (what the plugin reads and writes), the host's `#meta` (the source
//! settings it was kept for, the generation of the last full sync that
//! swept) and `#children` (each parent's children, to delete those a new
//! version no longer makes). Showing reads them without making anything
//! (no file, no topic); resetting clears all three, so the next run finds
//! no state: a full sync that, once complete, deletes from the index what
//! this sync indexed and the source no longer holds.

use std::collections::BTreeMap;

use serde::Serialize;

use super::sync::{GENERATION_KEY, SOURCE_KEY, source_fingerprint};
use super::{LoadedPlugins, Runner};
use crate::config::ConnectorConfig;
use crate::core::state::{HostPart, StateError, StateStore, StateStores, SyncScope};

/// Keys shown unless asked for more.
pub const DEFAULT_SHOWN_KEYS: usize = 10;
/// Most keys one answer shows.
pub const MAX_SHOWN_KEYS: usize = 1000;
/// Most bytes of a value shown.
const SHOWN_VALUE_BYTES: usize = 200;

/// What to show of each sync's state.
#[derive(Debug, Clone, Default)]
pub struct StateQuery {
    /// Only this connector (else every syncing connector of the config).
    pub connector: Option<String>,
    /// How many keys to show, in key order (at most [`MAX_SHOWN_KEYS`]).
    pub keys: usize,
    /// Show keys after this one (a page's `next_after`).
    pub after: Option<String>,
}

/// One syncing connector's state, as kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncState {
    pub pipeline: String,
    pub connector: String,
    /// The sync's id (`[state] id`, or its default); none when the scope
    /// is the pipeline and connector alone (Kafka mode without an id).
    pub id: Option<String>,
    /// The sync's scope: what its documents carry as `_weir_source`.
    pub sync: String,
    /// Where it is kept (a file, a topic).
    pub kept_in: String,
    /// Whether that place exists; when not, nothing below is kept.
    pub exists: bool,
    /// The connector's own keys, and their keys' and values' bytes.
    pub keys: u64,
    pub bytes: u64,
    /// The fingerprint of the source settings the state was kept for.
    pub source: Option<String>,
    /// This config's source settings differ from those: its next run sets
    /// the state aside and is a full sync.
    pub source_changed: bool,
    /// The generation of the last full sync that swept (milliseconds since
    /// the epoch when it began).
    pub generation: Option<u64>,
    /// Parents whose children are kept.
    pub children: u64,
    /// A page of keys, in order.
    pub shown: Vec<ShownKey>,
    /// Where the next page starts (`after`), when there are more keys.
    pub next_after: Option<String>,
}

/// One key of a page, with its value (cut to 200 bytes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownKey {
    pub key: String,
    pub value: String,
    /// The whole value's length; more than `value`'s when it was cut.
    pub value_bytes: usize,
}

/// Which sync a syncing connector keeps state for, and where: what
/// `weir validate` says of it (nothing is read).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncOf {
    pub connector: String,
    pub sync: String,
    pub kept_in: String,
}

/// What a reset cleared of one syncing connector.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncReset {
    pub pipeline: String,
    pub connector: String,
    pub sync: String,
    pub kept_in: String,
    /// Whether there was anything to clear (the place exists).
    pub exists: bool,
    /// Keys cleared: the connector's, the meta's, the children's.
    pub keys: u64,
    pub meta: u64,
    pub children: u64,
}

/// Why a config's state cannot be shown or reset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateInspectError {
    /// None of the config's connectors keeps state.
    #[error(
        "no connector of this config keeps state ({0}): only a syncing connector does (one that imports weir:plugin/sync, as file-connector with `incremental = true`)"
    )]
    NoSyncingConnector(String),
    /// The connector asked for is not in the config.
    #[error("no connector `{name}` in this config (its connectors: {known})")]
    NoSuchConnector { name: String, known: String },
    /// The connector asked for keeps no state.
    #[error(
        "connector `{0}` keeps no state: it does not sync (it does not import weir:plugin/sync)"
    )]
    NotSyncing(String),
    /// Where the state would be kept does not exist: nothing is kept yet.
    #[error(
        "no state is kept for this config: {0} does not exist (a syncing connector's first run makes it); nothing was made"
    )]
    NotKept(String),
    /// The state could not be read or cleared (a corrupted file, a
    /// cluster that does not answer).
    #[error("{0}")]
    Store(String),
}

impl From<StateError> for StateInspectError {
    fn from(e: StateError) -> Self {
        Self::Store(e.0)
    }
}

/// A scope's keys as kept: each with its value cut for showing and its
/// whole length (a later change of a key wins, a removal forgets it).
fn read(store: &mut dyn StateStore) -> Result<BTreeMap<String, (String, usize)>, StateError> {
    let mut keys = BTreeMap::new();
    store.load_each(&mut |(key, value)| {
        match value {
            Some(value) => {
                let len = value.len();
                let shown = match crate::core::text::cut_at(&value, SHOWN_VALUE_BYTES) {
                    Some(start) => start.to_owned(),
                    None => value,
                };
                keys.insert(key, (shown, len));
            }
            None => {
                keys.remove(&key);
            }
        }
        Ok(())
    })?;
    Ok(keys)
}

impl Runner {
    /// The connectors of this config whose state to show or reset: `only`,
    /// else every one that keeps state.
    fn syncing<'a>(
        &'a self,
        plugins: &LoadedPlugins,
        only: Option<&str>,
    ) -> Result<Vec<&'a ConnectorConfig>, StateInspectError> {
        let keeps = |c: &ConnectorConfig| {
            plugins
                .connectors
                .get(&c.name)
                .is_some_and(crate::plugin::ConnectorPlugin::keeps_state)
        };
        let all = &self.config.connectors;
        let names = || {
            let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        match only {
            Some(name) => {
                let c = all.iter().find(|c| c.name == name).ok_or_else(|| {
                    StateInspectError::NoSuchConnector {
                        name: name.to_owned(),
                        known: names(),
                    }
                })?;
                if keeps(c) {
                    Ok(vec![c])
                } else {
                    Err(StateInspectError::NotSyncing(name.to_owned()))
                }
            }
            None => {
                let syncing: Vec<_> = all.iter().filter(|c| keeps(c)).collect();
                if syncing.is_empty() {
                    Err(StateInspectError::NoSyncingConnector(format!(
                        "its connectors: {}",
                        names()
                    )))
                } else {
                    Ok(syncing)
                }
            }
        }
    }

    fn scope_of(&self, c: &ConnectorConfig) -> SyncScope {
        SyncScope::new(self.sync_id.as_deref(), &c.pipeline, &c.name)
    }

    /// Whether each connector's store exists; an error when none does.
    fn kept<'a>(
        &self,
        connectors: &[&'a ConnectorConfig],
    ) -> Result<Vec<(&'a ConnectorConfig, bool)>, StateInspectError> {
        let states: &dyn StateStores = self.states.as_ref();
        let mut known: BTreeMap<&str, bool> = BTreeMap::new();
        let mut out = Vec::with_capacity(connectors.len());
        for c in connectors {
            let exists = match known.get(c.pipeline.as_str()) {
                Some(&exists) => exists,
                None => {
                    let exists = states.exists(&c.pipeline)?;
                    known.insert(&c.pipeline, exists);
                    exists
                }
            };
            out.push((*c, exists));
        }
        Ok(out)
    }

    /// The sync each syncing connector of this config keeps state for, and
    /// where; none when no connector keeps state. Reads nothing.
    pub fn syncs(&self, plugins: &LoadedPlugins) -> Vec<SyncOf> {
        self.syncing(plugins, None)
            .unwrap_or_default()
            .into_iter()
            .map(|c| SyncOf {
                connector: c.name.clone(),
                sync: self.scope_of(c).name(),
                kept_in: self.states.describe(&c.pipeline),
            })
            .collect()
    }

    /// What each syncing connector of this config keeps (or connector
    /// `query.connector`'s): its keys and bytes, a page of its keys, its
    /// meta and children. Reads only: nothing is made where nothing is
    /// kept (that is [`StateInspectError::NotKept`]).
    pub fn sync_states(
        &self,
        plugins: &LoadedPlugins,
        query: &StateQuery,
    ) -> Result<Vec<SyncState>, StateInspectError> {
        let connectors = self.syncing(plugins, query.connector.as_deref())?;
        let kept = self.kept(&connectors)?;
        if kept.iter().all(|(_, exists)| !exists) {
            let places: Vec<String> = kept
                .iter()
                .map(|(c, _)| self.states.describe(&c.pipeline))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Err(StateInspectError::NotKept(places.join(", ")));
        }
        let shown = query.keys.min(MAX_SHOWN_KEYS);
        kept.into_iter()
            .map(|(c, exists)| self.sync_state(c, exists, shown, query.after.as_deref()))
            .collect()
    }

    fn sync_state(
        &self,
        c: &ConnectorConfig,
        exists: bool,
        shown: usize,
        after: Option<&str>,
    ) -> Result<SyncState, StateInspectError> {
        let scope = self.scope_of(c);
        let mut state = SyncState {
            pipeline: c.pipeline.clone(),
            connector: c.name.clone(),
            id: scope.id.clone(),
            sync: scope.name(),
            kept_in: self.states.describe(&c.pipeline),
            exists,
            keys: 0,
            bytes: 0,
            source: None,
            source_changed: false,
            generation: None,
            children: 0,
            shown: Vec::new(),
            next_after: None,
        };
        if !exists {
            return Ok(state);
        }
        let open = |scope: &SyncScope| self.states.open(&c.pipeline, &scope.within_pipeline());
        let meta = read(open(&scope.part(HostPart::Meta))?.as_mut())?;
        state.source = meta.get(SOURCE_KEY).map(|(v, _)| v.clone());
        state.source_changed = state
            .source
            .as_ref()
            .is_some_and(|kept| *kept != source_fingerprint(c));
        state.generation = meta.get(GENERATION_KEY).and_then(|(v, _)| v.parse().ok());
        state.children = read(open(&scope.part(HostPart::Children))?.as_mut())?.len() as u64;
        let keys = read(open(&scope)?.as_mut())?;
        state.keys = keys.len() as u64;
        state.bytes = keys
            .iter()
            .map(|(k, (_, len))| (k.len() + len) as u64)
            .sum();
        use std::ops::Bound;
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut page = keys.range::<str, _>((from, Bound::Unbounded));
        state.shown = page
            .by_ref()
            .take(shown)
            .map(|(key, (value, len))| ShownKey {
                key: key.clone(),
                value: value.clone(),
                value_bytes: *len,
            })
            .collect();
        if page.next().is_some() {
            state.next_after = state.shown.last().map(|k| k.key.clone());
        }
        Ok(state)
    }

    /// Clear what each syncing connector of this config keeps (or
    /// connector `only`'s): its own keys, its meta and its children. Its
    /// next run finds no state: a full sync that cleans up once complete.
    /// Nothing is made where nothing is kept. Reset only while no run of
    /// the config goes on: a run holds its state in memory and keeps it.
    pub fn reset_sync_states(
        &self,
        plugins: &LoadedPlugins,
        only: Option<&str>,
    ) -> Result<Vec<SyncReset>, StateInspectError> {
        let connectors = self.syncing(plugins, only)?;
        self.kept(&connectors)?
            .into_iter()
            .map(|(c, exists)| {
                let scope = self.scope_of(c);
                let mut reset = SyncReset {
                    pipeline: c.pipeline.clone(),
                    connector: c.name.clone(),
                    sync: scope.name(),
                    kept_in: self.states.describe(&c.pipeline),
                    exists,
                    keys: 0,
                    meta: 0,
                    children: 0,
                };
                if !exists {
                    return Ok(reset);
                }
                let clear = |scope: &SyncScope| -> Result<u64, StateError> {
                    let mut store = self.states.open(&c.pipeline, &scope.within_pipeline())?;
                    let kept = read(store.as_mut())?.len() as u64;
                    if kept > 0 {
                        store.clear()?;
                    }
                    Ok(kept)
                };
                // The connector's own keys first: a reset cut short leaves
                // no keys, and the next run is a full sync whatever the
                // meta still says.
                reset.keys = clear(&scope)?;
                reset.children = clear(&scope.part(HostPart::Children))?;
                reset.meta = clear(&scope.part(HostPart::Meta))?;
                tracing::info!(
                    sync = %scope,
                    keys = reset.keys,
                    children = reset.children,
                    "sync state reset: the next run is a full sync"
                );
                Ok(reset)
            })
            .collect()
    }
}
