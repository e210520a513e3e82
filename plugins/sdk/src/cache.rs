//! The host's cache (contract 0.2.2, world `caching-stage`): bytes kept by
//! key between calls, instances, processes and runs, so what a service
//! computed once is not asked for again.
//!
//! Keys are content addresses: make each with [`key`] from everything that
//! decides the value (the model, the service, the input), so an entry is
//! never stale. The cache is bounded and may lose any entry, and one that
//! cannot be used answers misses: a miss means "compute it", never an error.
//!
//! ```ignore
//! let keys: Vec<String> = texts.iter().map(|t| cache::key(&[model.as_bytes(), t.as_bytes()])).collect();
//! let found = cache::get(&keys);
//! // ... compute what was not found, then keep it:
//! cache::put(&[(keys[0].as_str(), vector.as_bytes())]);
//! ```

use sha2::{Digest, Sha256};

use crate::bindings::batch_stage::weir::plugin::cache as host;

/// Most keys (or entries) the host takes in one call.
pub const MAX_PER_CALL: usize = 4096;

/// The SHA-256 (hex) of `parts`, each preceded by its length, so no two
/// different lists of parts make one key.
pub fn key(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The value kept under each of `keys`, in order (none when not kept), in
/// calls of at most [`MAX_PER_CALL`] keys.
pub fn get(keys: &[String]) -> Vec<Option<Vec<u8>>> {
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(MAX_PER_CALL) {
        out.extend(host::get(chunk));
    }
    out
}

/// Keep each value under its key; how many were kept (an entry over the
/// host's sizes, a key of 1 to 256 bytes and a value of at most 1 MiB, is
/// not, nor is any when the cache cannot be used).
pub fn put(entries: &[(&str, &[u8])]) -> u32 {
    let mut kept = 0;
    for chunk in entries.chunks(MAX_PER_CALL) {
        let owned: Vec<(String, Vec<u8>)> = chunk
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_vec()))
            .collect();
        kept += host::put(&owned);
    }
    kept
}
