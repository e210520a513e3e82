//! Write Weir plugins in Rust.
//!
//! The bindings for the plugin worlds of `weir:plugin@0.2.5` live here: a
//! trait and an export macro per kind, and small helpers: typed configs
//! ([`parse_config`]), logging macros, value conversions, and reading and
//! writing several fields of a document in one call
//! ([`Document::get_all_many`], [`Document::update`]).
//!
//! Where things are: the plugin kinds in `batch.rs` ([`BatchStage`] and the
//! stage exports), `connector.rs` and `indexer.rs` ([`Stage`] is here);
//! settings in `config.rs`; a document's values and field errors in
//! `document.rs`, several fields in one call in `fields.rs`, value-mapping
//! stages in `values.rs`; logging in `logging.rs`; packed indexer batches in
//! `packed.rs`; the host's cache, SQL and sync state in [`cache`], [`sql`]
//! and [`sync`]; messages from sources that never end (Kafka topics,
//! queues, pushes) in [`messages`].
//!
//! Stages come in three shapes, each handed a batch of documents per call:
//!
//! - [`BatchStage`] ([`export_batch_stage!`], world `batch-stage`): the
//!   whole batch at once, an [`Outcome`] per document.
//! - [`Stage`] ([`export_stage!`], world `batch-stage`): one document at a
//!   time; the SDK calls [`Stage::process`] for each document of a batch.
//! - [`FieldStage`] ([`export_field_stage!`], world `packing-stage`): the
//!   fields it names read for the whole batch, and its changes made, in one
//!   host call each, as packed text (`field_stage.rs`).
//!
//! A batch stage that upper-cases a field:
//!
//! ```ignore
//! use weir_plugin::{BatchStage, Document, Outcome, PluginError, doc_error, per_document};
//!
//! #[derive(serde::Deserialize)]
//! struct Config { field: String }
//!
//! struct Upper(Config);
//!
//! impl BatchStage for Upper {
//!     type Config = Config;
//!     fn start(config: Config) -> Result<Self, String> { Ok(Self(config)) }
//!     fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
//!         // One outcome per document: an error fails only its document.
//!         Ok(per_document(docs, |doc| {
//!             match doc.get_string(&self.0.field) {
//!                 Some(text) => doc.set_string(&self.0.field, &text.to_uppercase()).map_err(doc_error),
//!                 None => Ok(()),
//!             }
//!         }))
//!     }
//! }
//! weir_plugin::export_batch_stage!(Upper);
//! ```

#[cfg(feature = "content")]
pub mod content;
#[doc(hidden)]
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
pub mod search;

pub mod bindings {
    pub mod stage {
        wit_bindgen::generate!({
            world: "stage",
            path: "../../wit",
            pub_export_macro: true,
            export_macro_name: "__export_stage_world",
            default_bindings_module: "weir_plugin::bindings::stage",
        });
    }
    /// Stages are built for `caching-stage` (`batch-stage` and the host's
    /// cache): a stage that never calls [`crate::cache`] imports nothing
    /// more than `batch-stage` does.
    pub mod batch_stage {
        wit_bindgen::generate!({
            world: "caching-stage",
            path: "../../wit",
            pub_export_macro: true,
            export_macro_name: "__export_batch_stage_world",
            default_bindings_module: "weir_plugin::bindings::batch_stage",
            with: {
                "weir:plugin/types@0.2.5": super::stage::weir::plugin::types,
                "weir:plugin/log@0.2.5": super::stage::weir::plugin::log,
                "weir:plugin/document@0.2.5": super::stage::weir::plugin::document,
            },
        });
    }
    /// What a [`FieldStage`](crate::FieldStage) exports beside the
    /// `batch-stage` world's `stage-batch-api`: `stage-lent-api`, with the
    /// `lending-packed` import (world `packing-stage`). A component holds
    /// both worlds, which its build merges into one.
    pub mod field_stage {
        wit_bindgen::generate!({
            inline: "package weir:sdk; world field-stage { import weir:plugin/log@0.2.5; import weir:plugin/lending@0.2.5; import weir:plugin/lending-packed@0.2.5; export weir:plugin/stage-lent-api@0.2.5; }",
            world: "weir:sdk/field-stage",
            path: "../../wit",
            generate_all,
            pub_export_macro: true,
            export_macro_name: "__export_field_stage_world",
            default_bindings_module: "weir_plugin::bindings::field_stage",
            with: {
                "weir:plugin/types@0.2.5": super::stage::weir::plugin::types,
                "weir:plugin/log@0.2.5": super::stage::weir::plugin::log,
                "weir:plugin/document@0.2.5": super::stage::weir::plugin::document,
            },
        });
    }
    /// Connectors are built for `syncing-connector` and `streaming-connector`
    /// at once: a connector imports only what it calls (one that never calls
    /// [`crate::sync`] or [`crate::messages`] imports nothing more than
    /// `connector` does), so the host sees the world it uses.
    pub mod connector {
        wit_bindgen::generate!({
            inline: "package weir:sdk; world connectors { include weir:plugin/syncing-connector@0.2.5; include weir:plugin/streaming-connector@0.2.5; include weir:plugin/packing-connector@0.2.5; include weir:plugin/counting-connector@0.2.5; }",
            world: "weir:sdk/connectors",
            path: "../../wit",
            generate_all,
            pub_export_macro: true,
            export_macro_name: "__export_connector_world",
            default_bindings_module: "weir_plugin::bindings::connector",
            with: {
                "weir:plugin/types@0.2.5": super::stage::weir::plugin::types,
                "weir:plugin/log@0.2.5": super::stage::weir::plugin::log,
                "weir:plugin/document@0.2.5": super::stage::weir::plugin::document,
            },
        });
    }
    /// Indexers export `indexer-api` and `indexer-packed-api`: the host
    /// calls `index-packed`, and a host that does not know it, `index-batch`.
    pub mod indexer {
        wit_bindgen::generate!({
            world: "packed-indexer",
            path: "../../wit",
            pub_export_macro: true,
            export_macro_name: "__export_indexer_world",
            default_bindings_module: "weir_plugin::bindings::indexer",
            with: {
                "weir:plugin/types@0.2.5": super::stage::weir::plugin::types,
                "weir:plugin/log@0.2.5": super::stage::weir::plugin::log,
            },
        });
    }
}

mod batch;
pub mod cache;
mod config;
mod connector;
mod document;
mod field_stage;
mod fields;
mod indexer;
mod logging;
pub mod messages;
pub mod outbox;
mod packed;
pub mod progress;
pub mod sql;
pub mod sweep;
pub mod sync;
mod values;

#[doc(hidden)]
pub use batch::__process_each;
pub use batch::{BatchStage, Outcome, per_document};
#[doc(hidden)]
pub use config::__checked_config;
pub use config::{
    DELETED_FIELD, FieldMapping, Mode, RESERVED_FIELDS, check_config, issue, parse_config,
    read_text_file, reserved_field_issues,
};
pub use connector::Connector;
pub use document::{doc_error, field_error_message, update};
#[doc(hidden)]
pub use field_stage::{__field_batch, __field_lent};
pub use field_stage::{Changes, FieldStage, Lent};
pub use fields::{Change, FieldChange, get_json_each, update_batch, update_each};
pub use indexer::{
    Indexer, batch_error, failure, indexer_instance, instance_path, picked, whole_json,
};
pub use logging::{log, log_enabled};
pub use outbox::Outbox;
pub use packed::{Entry, Packed};
pub use serde;
pub use serde_json;
pub use values::{field_pairs, is_whole_word, map_values, text_of};

pub use bindings::connector::weir::plugin::publishing::Publisher;
pub use bindings::indexer::exports::weir::plugin::indexer_api::{
    BatchEntry, BatchError, BatchFormat, DocumentFailure,
};
pub use bindings::stage::weir::plugin::document::{Document, FieldError, UpdateMode, Value};
pub use bindings::stage::weir::plugin::log::Level;
pub use bindings::stage::weir::plugin::types::{ConfigIssue, PluginError};

use serde::de::DeserializeOwned;

/// A stage that changes documents one at a time. [`export_stage!`] exports
/// it as a batch stage that calls [`Stage::process`] for each document of a
/// batch; a stage that gains from seeing the whole batch implements
/// [`BatchStage`] instead.
pub trait Stage: Sized + 'static {
    /// The stage's settings, parsed from the pipeline config.
    type Config: DeserializeOwned;
    /// Checks beyond parsing (ranges, regex syntax, ...), all reported at once.
    fn check(_config: &Self::Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    /// Build the stage from its settings.
    fn start(config: Self::Config) -> Result<Self, String>;
    /// Change `doc` in place; return child documents, if any.
    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError>;
    fn stop(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}

/// What the export macros answer a call that comes before `start`.
#[doc(hidden)]
pub fn __not_started() -> PluginError {
    PluginError::Fatal("the host called the plugin before `start`".into())
}
