//! The seam between a run's connector state and where it is kept: a SQLite
//! file in local mode, a compacted Kafka topic in Kafka and Hybrid modes.
//!
//! A connector's state is a map of text keys to text values, named by a
//! scope (its pipeline and connector). The run holds what the connector sees
//! and decides what may be committed (see `run/state/`), keeping it as a
//! [`HeldState`] (`held.rs`: the view, the changes not yet committed, and
//! the one check of `limits.max_state_mib`); a store only loads a scope and
//! writes committed changes, atomically per call.

mod held;

pub use held::{Change, HeldState};

/// What the host spends holding one key of a connector's state beyond the
/// bytes of its key and value: the two `String`s in a node of the ordered
/// map (a node of 11 is about half full when keys come in order), the
/// allocations of its key and value, the node's share of the tree.
/// `limits.max_state_mib` counts it, so a state of many tiny keys is
/// bounded by what it costs, not by its text.
///
/// Measured (release build, 500k-1M keys of 8 bytes, values of 0-100
/// bytes, the RSS a map of them adds): 87-119 bytes a key under mimalloc
/// (the binary's allocator), 100-151 under glibc's (its 32-byte smallest
/// chunk for a 1-byte value, keys in order); in random order the nodes are
/// fuller and a key costs ~20 bytes less. 192 is above every figure, with
/// room for the rounding of longer keys and values (proportional to their
/// text, up to a quarter of it in mimalloc's size classes, which the text's
/// own count mostly covers). The ~205 bytes a key measured of a whole run
/// (`tests/all/limits.rs`: 465k keys, ~91 MiB over an empty run) are a key
/// in the view *and* its change waiting in the queue: counted then as
/// 192 + [`CHANGE_ENTRY_BYTES`] = 320 bytes beside the text, so the bound
/// holds with a margin of about a half.
pub const VIEW_ENTRY_BYTES: usize = 192;

/// What the host spends holding one change not yet committed beyond its
/// key and value: the change in its queue (which may hold twice its
/// length), its allocations, and its row in a commit's slice. Measured as
/// above: 100-126 bytes a change (the most under mimalloc, whose queue
/// grown by doubling keeps its old buffer's pages).
pub const CHANGE_ENTRY_BYTES: usize = 128;

/// Why state could not be loaded or kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StateError(pub String);

impl StateError {
    pub fn new(message: impl std::fmt::Display) -> Self {
        Self(message.to_string())
    }
}

/// One committed change: a key set to a value, or removed (`None`).
pub type StateChange = (String, Option<String>);

/// Where one scope's state is kept.
pub trait StateStore: Send {
    /// Every key and value of the scope, in any order.
    fn load(&mut self) -> Result<Vec<(String, String)>, StateError>;
    /// The scope's state handed to `each` a change at a time, in an order
    /// that rebuilds it (a later change of a key wins, `None` removes it),
    /// stopping at the first error `each` returns: the loader bounds what it
    /// holds as it reads, so a store grown past the bound (under an older,
    /// looser one, or edited by hand) is refused before it is in memory. A
    /// store that can read one key at a time does; this default reads
    /// everything with [`load`](Self::load) first.
    fn load_each(
        &mut self,
        each: &mut dyn FnMut(StateChange) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        self.load()?
            .into_iter()
            .try_for_each(|(key, value)| each((key, Some(value))))
    }
    /// Keep `changes`, in order (a later change of a key wins): all of them
    /// or, on an error, as many as the store says (none, for a store with
    /// transactions); the caller keeps the rest and tries again.
    fn commit(&mut self, changes: &[StateChange]) -> Result<(), StateError>;
    /// Forget every key of the scope.
    fn clear(&mut self) -> Result<(), StateError>;
}

/// Which sync a connector's state belongs to: the connector of a pipeline,
/// under the sync's id (`[state] id`; by default, in local mode, the config
/// file's stem). Two configs read and write one state only when they name
/// the same id. Beside the connector's own state the host keeps its own
/// parts (never seen by the plugin): [`SyncScope::part`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SyncScope {
    /// The sync's id; none keeps the scope of older releases (Kafka mode,
    /// where the pipeline's topics are already the fleet's shared identity).
    pub id: Option<String>,
    pub pipeline: String,
    pub connector: String,
    /// A host part, none for the connector's own state.
    pub part: Option<HostPart>,
}

/// The host's own parts of a sync's state, kept beside the connector's keys
/// and never seen by the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostPart {
    /// What the sync was made from and how its last run ended.
    Meta,
    /// Each root's children, so that a child its parent no longer makes is
    /// deleted.
    Children,
}

impl HostPart {
    /// The part's name in a scope's name (`#meta`, `#children`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Meta => "meta",
            Self::Children => "children",
        }
    }
}

impl SyncScope {
    pub fn new(id: Option<&str>, pipeline: &str, connector: &str) -> Self {
        Self {
            id: id.filter(|id| !id.is_empty()).map(str::to_owned),
            pipeline: pipeline.to_owned(),
            connector: connector.to_owned(),
            part: None,
        }
    }

    /// The host's own part `part` of this scope.
    pub fn part(&self, part: HostPart) -> Self {
        Self {
            part: Some(part),
            ..self.clone()
        }
    }

    /// The scope's name within its pipeline: `<id>/<connector>` (or the
    /// connector alone without an id), with `#<part>` for a host part. The
    /// Kafka store keys a pipeline's topic by it.
    pub fn within_pipeline(&self) -> String {
        let mut name = match &self.id {
            Some(id) => format!("{id}/{}", self.connector),
            None => self.connector.clone(),
        };
        if let Some(part) = self.part {
            name.push('#');
            name.push_str(part.name());
        }
        name
    }

    /// The whole name: `<pipeline>/<id>/<connector>[#part]`. What a local
    /// store keys rows by, and what documents of the sync carry as
    /// `_weir_source`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.pipeline, self.within_pipeline())
    }
}

impl std::fmt::Display for SyncScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Opens the store of a scope.
pub trait StateStores: Send + Sync {
    /// The store of connector `connector` of pipeline `pipeline` (a
    /// scope's [`SyncScope::within_pipeline`]).
    fn open(&self, pipeline: &str, connector: &str) -> Result<Box<dyn StateStore>, StateError>;
    /// Where state is kept, for messages (a file, a topic).
    fn describe(&self, pipeline: &str) -> String;
    /// Whether the place pipeline `pipeline`'s state is kept exists (its
    /// file, its topic), asked without making it: a store that is not
    /// there keeps nothing. A store that is always there says yes.
    fn exists(&self, pipeline: &str) -> Result<bool, StateError> {
        let _ = pipeline;
        Ok(true)
    }
}

/// State kept in memory only, gone when the process ends: for embedders
/// and tests that want no files.
#[derive(Debug, Default)]
pub struct MemoryStates {
    scopes: std::sync::Mutex<
        std::collections::HashMap<String, std::collections::BTreeMap<String, String>>,
    >,
}

/// One scope of [`MemoryStates`].
struct MemoryStore {
    scope: String,
    states: std::sync::Arc<MemoryStates>,
}

impl StateStores for std::sync::Arc<MemoryStates> {
    fn open(&self, pipeline: &str, connector: &str) -> Result<Box<dyn StateStore>, StateError> {
        Ok(Box::new(MemoryStore {
            scope: format!("{pipeline}/{connector}"),
            states: std::sync::Arc::clone(self),
        }))
    }
    fn describe(&self, _pipeline: &str) -> String {
        "memory".into()
    }
}

impl MemoryStore {
    fn with<T>(&self, f: impl FnOnce(&mut std::collections::BTreeMap<String, String>) -> T) -> T {
        let mut scopes = self
            .states
            .scopes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(scopes.entry(self.scope.clone()).or_default())
    }
}

impl StateStore for MemoryStore {
    fn load(&mut self) -> Result<Vec<(String, String)>, StateError> {
        Ok(self.with(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
    }
    fn load_each(
        &mut self,
        each: &mut dyn FnMut(StateChange) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        self.with(|map| {
            map.iter()
                .try_for_each(|(k, v)| each((k.clone(), Some(v.clone()))))
        })
    }
    fn commit(&mut self, changes: &[StateChange]) -> Result<(), StateError> {
        self.with(|map| {
            for (key, value) in changes {
                match value {
                    Some(value) => map.insert(key.clone(), value.clone()),
                    None => map.remove(key),
                };
            }
        });
        Ok(())
    }
    fn clear(&mut self) -> Result<(), StateError> {
        self.with(std::collections::BTreeMap::clear);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// State kept by earlier runs is found again: the names a scope and its
    /// host parts are stored under do not change.
    #[test]
    fn a_scope_and_its_host_parts_keep_their_stored_names() {
        let scope = SyncScope::new(Some("books"), "p", "files");
        assert_eq!(scope.name(), "p/books/files");
        assert_eq!(
            scope.part(HostPart::Meta).within_pipeline(),
            "books/files#meta"
        );
        assert_eq!(
            scope.part(HostPart::Children).name(),
            "p/books/files#children"
        );
        let older = SyncScope::new(None, "p", "files");
        assert_eq!(older.part(HostPart::Meta).within_pipeline(), "files#meta");
    }
}
