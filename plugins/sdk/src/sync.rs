//! Incremental sync (contract 0.2.2): state a connector keeps between runs,
//! and deletion markers.
//!
//! The host keeps a map of text keys to text values per connector. A change
//! is kept for the next run only once every document published before it
//! is done, so the usual loop is: list the source; for each item that is new
//! or changed (its version differs from [`get`]), publish it, then [`set`]
//! its version; at the end, for each key the source no longer has,
//! [`delete`] the document, then [`remove`] the key. A run that crashes
//! keeps exactly the state of the work that was finished.
//!
//! ```ignore
//! for item in source.list()? {
//!     if sync::full_sync() || sync::get(&item.key).as_deref() != Some(&item.etag) {
//!         publisher.publish(item.to_document()?)?;
//!         sync::set(&item.key, &item.etag)?;
//!     }
//!     seen.insert(item.key);
//! }
//! // For each key kept that the source no longer lists: delete, then remove.
//! sync::delete_unseen(publisher, &seen, |key| key.to_owned())?;
//! ```

use crate::bindings::connector::weir::plugin::sync as host;
use crate::{PluginError, Publisher};

/// The value under `key`: this run's latest, else the one earlier runs kept.
pub fn get(key: &str) -> Option<String> {
    host::get(key)
}

/// Keep `value` under `key`, for the next run once the documents published
/// so far are done. Refused (a fatal error naming why: the run stops) when
/// the key or value is too large or the state is over `limits.max_state_mib`.
pub fn set(key: &str, value: &str) -> Result<(), PluginError> {
    host::set(key, value).map_err(PluginError::Fatal)
}

/// Forget `key`, as [`set`] keeps one.
pub fn remove(key: &str) -> Result<(), PluginError> {
    host::remove(key).map_err(PluginError::Fatal)
}

/// How many keys the state holds, and the bytes of their keys and values.
pub fn size() -> (u64, u64) {
    host::size()
}

/// Whether this run sends everything again (`weir run --full`).
pub fn full_sync() -> bool {
    host::full_sync()
}

/// Publish a deletion marker for document `id`: it skips the stages and the
/// indexer deletes the document.
pub fn delete(publisher: &Publisher, id: &str) -> Result<(), PluginError> {
    host::delete(publisher, id).map_err(PluginError::Fatal)
}

/// The end of a full listing: for every key the state holds that is not in
/// `seen` (the keys listed this run), publish a deletion marker for the
/// document `id_of(key)`, then remove the key. Returns how many were gone.
pub fn delete_unseen(
    publisher: &Publisher,
    seen: &std::collections::HashSet<String>,
    id_of: impl Fn(&str) -> String,
) -> Result<usize, PluginError> {
    let gone: Vec<String> = entries()
        .map(|(key, _)| key)
        .filter(|key| !seen.contains(key))
        .collect();
    for key in &gone {
        delete(publisher, &id_of(key))?;
        remove(key)?;
    }
    Ok(gone.len())
}

/// Every key and value, in key order, fetched a page at a time.
pub fn entries() -> Entries {
    Entries {
        page: Vec::new().into_iter(),
        after: None,
        done: false,
    }
}

/// The iterator of [`entries`].
pub struct Entries {
    page: std::vec::IntoIter<(String, String)>,
    after: Option<String>,
    done: bool,
}

/// Entries per page.
const PAGE: u32 = 1024;

impl Iterator for Entries {
    type Item = (String, String);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.page.next() {
            return Some(entry);
        }
        if self.done {
            return None;
        }
        let page = host::list(self.after.as_deref(), PAGE);
        self.done = page.len() < PAGE as usize;
        self.after = page.last().map(|(key, _)| key.clone());
        self.page = page.into_iter();
        self.page.next()
    }
}
