//! What documents of a sync carry, and the sweep marker that ends a
//! complete full sync (see `run::sync`).

use serde_json::Value;

use super::document::Document;

/// The field naming the sync a document came from (its scope's name).
pub const SOURCE_FIELD: &str = "_weir_source";
/// The field holding the generation of the run that sent a document.
pub const GENERATION_FIELD: &str = "_weir_sync";
/// Set (`true`) on a sweep marker.
pub const SWEEP_FIELD: &str = "_weir_sweep";
/// On a sweep marker: the largest share of the sync's documents in the
/// index it may delete.
pub const SWEEP_SHARE_FIELD: &str = "_weir_max_delete_share";

/// Whether `doc` is a sweep marker: the host's, by its id (`_weir_sweep:`
/// and the sync) and its `_weir_sweep` of `true`. Both travel with the
/// document (Kafka mode too). A record that merely holds the field is never
/// taken for one; a plugin that forges the id as well can do within its
/// own index what its deletion markers could.
pub fn is_sweep(doc: &Document) -> bool {
    is_sweep_id(doc.id()) && doc.get(SWEEP_FIELD) == Some(&Value::Bool(true))
}

/// The start of a sweep marker's id (`_weir_sweep:<sync>`).
pub const SWEEP_ID_PREFIX: &str = "_weir_sweep:";

/// Whether `id` is a sweep marker's.
pub fn is_sweep_id(id: &str) -> bool {
    id.starts_with(SWEEP_ID_PREFIX)
}

/// Give `child`, made from `parent`, the sync and generation its parent
/// carries (what a stage set in their place is overwritten): a full
/// sync's sweep then finds children of older generations too.
pub fn inherit(parent: &Document, child: &mut Document) {
    for name in [SOURCE_FIELD, GENERATION_FIELD] {
        if let Some(value) = parent.get(name) {
            // Not reserved, and a value the parent holds: cannot fail.
            let _ = child.replace(name, value.clone());
        }
    }
}
