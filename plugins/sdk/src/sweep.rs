//! Full syncs that clean up, as indexers see them: every document a syncing
//! connector publishes carries its source ([`SOURCE_FIELD`], the connector's
//! sync scope) and the run's generation ([`SYNC_FIELD`], a whole number that
//! only grows). At the end of a complete full sync the host sends one
//! **sweep marker**: an entry whose [`SWEEP_FIELD`] is `true`, meaning
//! "delete every document of this source whose generation is below this
//! one", unless that would delete more than [`SHARE_FIELD`] of the source's
//! documents (and more than [`ALWAYS_ALLOWED`]).
//!
//! An indexer handles markers when its batch format picks [`PICKS`] (in that
//! order, anywhere in its `pick` list); the host never sends one to an
//! indexer that does not.

/// `true` on a sweep marker.
pub const SWEEP_FIELD: &str = "_weir_sweep";
/// A document's source: the sync scope of the connector that published it.
pub const SOURCE_FIELD: &str = "_weir_source";
/// A document's generation: the run that last published it.
pub const SYNC_FIELD: &str = "_weir_sync";
/// On a sweep marker: the most a sweep may delete, as a share (0 to 1) of
/// the source's documents in the index.
pub const SHARE_FIELD: &str = "_weir_max_delete_share";
/// In an indexer's config, set by the host under `weir run --full
/// --rebuild`: the run's generation. Only indexers that declare the key in
/// their config take it; others refuse it as unknown.
pub const REBUILD_KEY: &str = "_weir_rebuild";

/// The start of a sweep marker's id: `_weir_sweep:<source>`.
pub const MARKER_ID_PREFIX: &str = "_weir_sweep:";

/// What an indexer picks to be told sweep markers, in this order.
pub const PICKS: [&str; 4] = [SWEEP_FIELD, SOURCE_FIELD, SYNC_FIELD, SHARE_FIELD];

/// A sweep may always delete this many documents, whatever the share.
pub const ALWAYS_ALLOWED: u64 = 10;

/// The picked fields as owned strings, for a batch format's `pick`.
pub fn picks() -> Vec<String> {
    PICKS.iter().map(|&name| name.to_owned()).collect()
}

/// One sweep: the source to clean, the generation that stays, the share.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub source: String,
    /// Documents of `source` below this generation are deleted.
    pub generation: u64,
    /// 0 to 1.
    pub max_share: f64,
}

impl Sweep {
    /// The sweep entry `id` asks for, from its picked values: `value(i)` is
    /// the first value of [`PICKS`]`[i]`. `None` for an ordinary entry
    /// (one a source or a stage gave a `_weir_sweep` field is one: only the
    /// host's marker has an id of [`MARKER_ID_PREFIX`]); `Some(Err)` for a
    /// marker that cannot be read.
    pub fn from_picked<'v>(
        id: &str,
        value: impl Fn(usize) -> Option<&'v str>,
    ) -> Option<Result<Sweep, String>> {
        if value(0).map(str::trim) != Some("true") {
            return None;
        }
        let named = id.strip_prefix(MARKER_ID_PREFIX)?;
        let read = || {
            let source = value(1)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("a sweep marker without `{SOURCE_FIELD}`"))?
                .to_owned();
            let generation = value(2)
                .and_then(|g| g.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    format!("a sweep marker whose `{SYNC_FIELD}` is not a whole number")
                })?;
            let max_share = match value(3) {
                None => 1.0,
                Some(share) => share
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|s| (0.0..=1.0).contains(s))
                    .ok_or_else(|| {
                        format!("a sweep marker whose `{SHARE_FIELD}` is not in 0..=1")
                    })?,
            };
            if source != named {
                return Err(format!(
                    "a sweep marker `{id}` whose `{SOURCE_FIELD}` is `{source}`"
                ));
            }
            Ok(Sweep {
                source,
                generation,
                max_share,
            })
        };
        Some(read())
    }

    /// Whether deleting `older` of the source's `total` documents is
    /// allowed; the refusal names the numbers and what to do.
    pub fn allows(&self, older: u64, total: u64) -> Result<(), String> {
        let allowed = (self.max_share * total as f64).floor() as u64;
        if older <= ALWAYS_ALLOWED || older <= allowed {
            return Ok(());
        }
        Err(format!(
            "sweep of `{}` refused: it would delete {older} of the {total} documents of this source \
             in the index ({:.1}%), more than the share allowed ({:.1}%, `[state] max_delete_share`); \
             nothing was deleted. If the source really lost them, run again with `--allow-deletes`",
            self.source,
            100.0 * older as f64 / total.max(1) as f64,
            100.0 * self.max_share,
        ))
    }

    /// Whether a document of `source` at `generation` goes in this sweep.
    pub fn removes(&self, source: Option<&str>, generation: Option<u64>) -> bool {
        source == Some(self.source.as_str()) && generation.is_none_or(|g| g < self.generation)
    }
}

/// A 128-bit digest of a document id, for indexers that keep one per
/// document while they rewrite a file (no two ids of a file share one in
/// practice: the chance is about n^2 / 2^129).
pub fn id_key(id: &str) -> u128 {
    use std::hash::{Hash, Hasher};
    let half = |salt: u8| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut hasher);
        id.hash(&mut hasher);
        hasher.finish()
    };
    (u128::from(half(1)) << 64) | u128::from(half(2))
}

/// Entry `id`'s sweep (see [`Sweep::from_picked`]): the first value of
/// each of [`PICKS`], from `picked` starting at `at`.
pub fn sweep_of(id: &str, picked: &[Vec<String>], at: usize) -> Option<Result<Sweep, String>> {
    Sweep::from_picked(id, |i| {
        picked
            .get(at + i)
            .and_then(|values| values.first())
            .map(String::as_str)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picked(values: &[&str]) -> Vec<Vec<String>> {
        values
            .iter()
            .map(|v| match *v {
                "" => Vec::new(),
                v => vec![v.to_owned()],
            })
            .collect()
    }

    #[test]
    fn a_marker_is_read_and_an_ordinary_entry_is_not() {
        assert_eq!(
            sweep_of("_weir_sweep:s", &picked(&["", "s", "5", ""]), 0),
            None
        );
        assert_eq!(
            sweep_of("_weir_sweep:s", &picked(&["false", "s", "5", ""]), 0),
            None
        );
        let sweep = sweep_of(
            "_weir_sweep:c/p/s",
            &picked(&["x", "true", "c/p/s", "17", "0.5"]),
            1,
        )
        .expect("a marker")
        .expect("readable");
        assert_eq!(
            sweep,
            Sweep {
                source: "c/p/s".into(),
                generation: 17,
                max_share: 0.5
            }
        );
        assert!(
            sweep_of("_weir_sweep:", &picked(&["true", "", "17", "0.5"]), 0)
                .expect("a marker")
                .is_err()
        );
        assert!(
            sweep_of("_weir_sweep:s", &picked(&["true", "s", "x", "0.5"]), 0)
                .expect("a marker")
                .is_err()
        );
        assert!(
            sweep_of("_weir_sweep:s", &picked(&["true", "s", "1", "1.5"]), 0)
                .expect("a marker")
                .is_err()
        );
    }

    #[test]
    fn only_the_hosts_marker_is_a_sweep() {
        let fields = picked(&["true", "s", "5", "1"]);
        assert_eq!(
            sweep_of("doc-1", &fields, 0),
            None,
            "a document with the field"
        );
        assert!(
            sweep_of("_weir_sweep:t", &fields, 0)
                .expect("a marker")
                .is_err()
        );
    }

    #[test]
    fn the_share_refuses_past_it_and_past_ten() {
        let sweep = Sweep {
            source: "s".into(),
            generation: 2,
            max_share: 0.5,
        };
        assert!(sweep.allows(10, 10).is_ok(), "ten always");
        assert!(sweep.allows(50, 100).is_ok());
        let refused = sweep.allows(51, 100).expect_err("over the share");
        assert!(refused.contains("51 of the 100"), "{refused}");
        assert!(sweep.removes(Some("s"), Some(1)));
        assert!(!sweep.removes(Some("s"), Some(2)));
        assert!(!sweep.removes(Some("t"), Some(1)));
        assert!(!sweep.removes(None, Some(1)));
    }
}
