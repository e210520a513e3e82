//! Sampling documents by id: the same documents in every worker and
//! process, for shadow stages and taps.

use std::hash::{Hash, Hasher};

/// A hash of a document id that is the same in every worker and process
/// (SipHash with fixed keys): what samples documents by id.
pub fn id_hash(id: &str) -> u64 {
    #[allow(deprecated)]
    let mut hasher = std::hash::SipHasher::new_with_keys(0x5745_4952, 0x5348_4144);
    id.hash(&mut hasher);
    hasher.finish()
}
