//! Host bindings for the WIT worlds in `wit/`: one `bindgen!` per world.
//!
//! The interfaces shared by every world (`types`, `log`, `document`) are
//! generated once, with the stage world, and reused by the others, so the host
//! implements each of them once.
//!
//! The host types behind WIT resources are in `super::resources`: these
//! bindings name them there, never in `host/`, which implements the traits
//! generated here.

/// One `bindgen!` for `world`: imports trappable, exports async, and the
/// WIT names in `with` mapped to host types or to interfaces already
/// generated.
macro_rules! world_bindings {
    ($world:literal, { $($with:tt)* }) => {
        wasmtime::component::bindgen!({
            world: $world,
            path: "../wit",
            imports: { default: trappable },
            exports: { default: async },
            with: { $($with)* },
        });
    };
}

pub mod stage {
    world_bindings!("stage", {
        "weir:plugin/document.document": crate::core::document::Document,
    });
}

pub mod batch_stage {
    world_bindings!("batch-stage", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
    });
}

/// The `lent-stage` world: its `lending` import is linked for every plugin,
/// and its `stage-lent-api` export is called as a typed function beside the
/// `batch-stage` bindings (`super::batch_world`).
pub mod lent_stage {
    world_bindings!("lent-stage", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
        "weir:plugin/fields": crate::plugin::bindings::batch_stage::weir::plugin::fields,
        "weir:plugin/lending.batch": crate::plugin::resources::LentBatch,
    });
}

/// The `packing-stage` world (0.2.4): its `lending-packed` import is linked
/// for every plugin; it exports what `lent-stage` does.
pub mod packing_stage {
    world_bindings!("packing-stage", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
        "weir:plugin/fields": crate::plugin::bindings::batch_stage::weir::plugin::fields,
        "weir:plugin/lending": crate::plugin::bindings::lent_stage::weir::plugin::lending,
    });
}

/// The `caching-stage` world: its `cache` import is linked for every
/// plugin; it exports what `batch-stage` does.
pub mod caching_stage {
    world_bindings!("caching-stage", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
        "weir:plugin/fields": crate::plugin::bindings::batch_stage::weir::plugin::fields,
    });
}

pub mod connector {
    world_bindings!("connector", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
        "weir:plugin/publishing.publisher": crate::plugin::resources::Publisher,
    });
}

/// The `packing-connector` world (0.2.3): its `publishing-packed` import
/// is linked for every plugin; it exports what `connector` does.
pub mod packing_connector {
    world_bindings!("packing-connector", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
        "weir:plugin/publishing": crate::plugin::bindings::connector::weir::plugin::publishing,
    });
}

/// The `counting-connector` world (0.2.5): its `progress` import is linked
/// for every plugin; it exports what `connector` does.
pub mod counting_connector {
    world_bindings!("counting-connector", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
        "weir:plugin/publishing": crate::plugin::bindings::connector::weir::plugin::publishing,
    });
}

/// The `syncing-connector` world: its `sync` and `sql` imports are linked
/// for every plugin; it exports what `connector` does. `sql` waits on the
/// database, so its functions are async.
pub mod syncing_connector {
    wasmtime::component::bindgen!({
        world: "syncing-connector",
        path: "../wit",
        imports: {
            "weir:plugin/sql": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        with: {
            "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
            "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
            "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
            "weir:plugin/publishing": crate::plugin::bindings::connector::weir::plugin::publishing,
            "weir:plugin/publishing-packed": crate::plugin::bindings::packing_connector::weir::plugin::publishing_packed,
            "weir:plugin/progress": crate::plugin::bindings::counting_connector::weir::plugin::progress,
            "weir:plugin/sql.rows": crate::plugin::resources::SqlRows,
        },
    });
}

/// The `streaming-connector` world: its `messages` import is linked for
/// every plugin; it exports what `connector` does.
pub mod streaming_connector {
    world_bindings!("streaming-connector", {
        "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
        "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        "weir:plugin/document": crate::plugin::bindings::stage::weir::plugin::document,
        "weir:plugin/publishing": crate::plugin::bindings::connector::weir::plugin::publishing,
        "weir:plugin/publishing-packed": crate::plugin::bindings::packing_connector::weir::plugin::publishing_packed,
        "weir:plugin/progress": crate::plugin::bindings::counting_connector::weir::plugin::progress,
        "weir:plugin/sync": crate::plugin::bindings::syncing_connector::weir::plugin::sync,
    });
}

/// The indexer's batch entries borrow what they send (ids and the text of
/// picked values straight from the documents), so a batch is lowered into
/// the guest without a copy of each string made first in the host.
pub mod indexer {
    wasmtime::component::bindgen!({
        world: "indexer",
        path: "../wit",
        imports: { default: trappable },
        exports: { default: async },
        ownership: Borrowing { duplicate_if_necessary: true },
        with: {
            "weir:plugin/types": crate::plugin::bindings::stage::weir::plugin::types,
            "weir:plugin/log": crate::plugin::bindings::stage::weir::plugin::log,
        },
    });
}

pub use batch_stage::exports::weir::plugin::stage_batch_api::Outcome as BatchOutcome;
pub use stage::weir::plugin::document::{FieldError, UpdateMode, Value};
pub use stage::weir::plugin::log::Level;
pub use stage::weir::plugin::types::{ConfigIssue, PluginError as GuestError};
