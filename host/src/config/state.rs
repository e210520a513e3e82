//! `[state]`: where connectors keep their state between runs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[state]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// Local mode: the SQLite file that keeps each connector's state,
    /// relative to the config; made when first needed. Default
    /// `weir-state.sqlite`. Kafka and Hybrid modes keep it on a compacted
    /// topic per pipeline, `<pipeline>_state`, so any runner can resume.
    #[serde(default = "StateConfig::default_path")]
    pub path: PathBuf,
    /// Which sync this config's connectors keep state for. Two configs
    /// read and write one state only when they name the same id (and, in
    /// local mode, the same `path`). Default, in local mode: the config
    /// file's stem (`sync.toml` keeps `sync`). Kafka and Hybrid modes key
    /// state by pipeline and connector on the pipeline's topic, with this
    /// id in front when it is set. Letters, digits, `.`, `_` and `-`, at
    /// most 128 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The id a local run uses when `id` is not set: the stem of the file
    /// the config was read from (none for a config from text).
    #[serde(skip)]
    pub default_id: Option<String>,
    /// The mass-delete guard: the largest share of the keys a syncing
    /// connector's state held when its run began that the run may delete
    /// (at least 10 deletes are always let through). A run that would
    /// delete more is refused with the numbers, and none of its deletes
    /// reach the indexer; `weir run --allow-deletes` lets one run through.
    /// From 0 to 1; default 0.5.
    #[serde(default = "StateConfig::default_max_delete_share")]
    pub max_delete_share: f64,
    /// Whether a change of a connector's source settings (its plugin
    /// config, bar what only bounds or paces a run, and its granted
    /// folders, hosts and databases) sets its state aside: the run is then
    /// a full sync whose sweep removes what the old source indexed.
    /// Default true. With false the change is only logged, and the
    /// connector diffs against the state it kept (for a change you know
    /// reads the same items, e.g. a column added to a query).
    #[serde(default = "StateConfig::default_track_source")]
    pub track_source: bool,
}

impl StateConfig {
    fn default_track_source() -> bool {
        true
    }

    /// The sync's id in local mode: `id`, else the config file's stem.
    pub fn local_id(&self) -> Option<&str> {
        self.id.as_deref().or(self.default_id.as_deref())
    }
}

/// Longest `[state] id`, in bytes.
pub const MAX_STATE_ID_BYTES: usize = 128;

/// Why `id` cannot name a sync; none when it can.
pub fn state_id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("an empty id: leave it out for the default".into());
    }
    if id.len() > MAX_STATE_ID_BYTES {
        return Some(format!(
            "{} bytes, over the {MAX_STATE_ID_BYTES} allowed",
            id.len()
        ));
    }
    id.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .map(|c| {
            format!(
                "{:?} is not allowed: letters, digits, `.`, `_` and `-` only",
                c
            )
        })
}

/// The default id of a config read from `file`: its stem, with what an id
/// cannot hold replaced by `_` (none when nothing is left).
pub fn default_state_id(file: &std::path::Path) -> Option<String> {
    let stem = file.file_stem()?.to_string_lossy();
    let id: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_STATE_ID_BYTES)
        .collect();
    (!id.is_empty()).then_some(id)
}

impl StateConfig {
    fn default_path() -> PathBuf {
        PathBuf::from("weir-state.sqlite")
    }

    /// `max_delete_share` when the config does not set it.
    pub const DEFAULT_MAX_DELETE_SHARE: f64 = 0.5;

    fn default_max_delete_share() -> f64 {
        Self::DEFAULT_MAX_DELETE_SHARE
    }

    /// Why `max_delete_share` cannot be used; none when it can.
    pub fn max_delete_share_problem(&self) -> Option<String> {
        let share = self.max_delete_share;
        (!(0.0..=1.0).contains(&share)).then(|| {
            format!(
                "is {share}: it must be a share from 0 to 1 (0.5 lets a run delete up to half of what its state holds; use `weir run --allow-deletes` to let one run delete more)"
            )
        })
    }
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            path: Self::default_path(),
            id: None,
            default_id: None,
            max_delete_share: Self::DEFAULT_MAX_DELETE_SHARE,
            track_source: true,
        }
    }
}
