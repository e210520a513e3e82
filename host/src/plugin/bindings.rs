//! Host bindings for the WIT worlds in `wit/`: one `bindgen!` per world.
//!
//! The interfaces shared by every world (`types`, `log`, `document`) are
//! generated once, with the stage world, and reused by the others, so the host
//! implements each of them once.

pub mod stage {
    wasmtime::component::bindgen!({
        world: "stage",
        path: "../wit",
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "weir:plugin/document.document": crate::document::Document,
        },
    });
}

pub mod connector {
    wasmtime::component::bindgen!({
        world: "connector",
        path: "../wit",
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "weir:plugin/types": super::stage::weir::plugin::types,
            "weir:plugin/log": super::stage::weir::plugin::log,
            "weir:plugin/document": super::stage::weir::plugin::document,
            "weir:plugin/publishing.publisher": crate::plugin::host::Publisher,
        },
    });
}

pub mod indexer {
    wasmtime::component::bindgen!({
        world: "indexer",
        path: "../wit",
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "weir:plugin/types": super::stage::weir::plugin::types,
            "weir:plugin/log": super::stage::weir::plugin::log,
        },
    });
}

pub use stage::weir::plugin::document::{FieldError, UpdateMode, Value};
pub use stage::weir::plugin::log::Level;
pub use stage::weir::plugin::types::{ConfigIssue, PluginError as GuestError};
