//! # Weir
//!
//! Weir moves documents from sources into search engines. A run is
//! connector -> stages -> indexer, and each of those is a sandboxed
//! WebAssembly component written against the WIT contract in `wit/`.
//!
//! The core ideas, from the bottom up, each with what it costs and how long
//! it lives:
//!
//! - [`Document`]: an id, a run id and JSON fields. It lives in the host;
//!   plugins touch it through handle methods, so a stage pays only for the
//!   fields it reads or writes. One per document, from its publish to its
//!   indexing.
//! - [`PluginRuntime`]: loads components (compiled once, cached on disk) and
//!   makes sandboxed instances: a memory cap, a deadline per call, and only
//!   the files, environment and HTTP hosts the config grants. One per
//!   process; an instance per worker (or per document), ~20-50 µs to make.
//!   A plugin that traps fails the document it was working on; its instance
//!   is replaced and the host goes on.
//! - Plugin kinds: [`StagePlugin`] changes documents, [`ConnectorPlugin`]
//!   publishes them, [`IndexerPlugin`] sends batches to a backend.
//! - Messengers ([`messenger`]) carry documents and events between the
//!   connector, the workers and the indexers: in-memory queues in local
//!   mode, Kafka topics in Kafka and Hybrid modes.
//! - [`Runner`]: runs a [`Config`]'s connectors one after the other, each
//!   through its pipeline's workers into its indexer, and counts every
//!   document until it is indexed, dropped or failed ([`RunResult`]).
//!   [`topology`] builds one for a mode; `weir run` and `weir serve` both
//!   call it.
//!
//! The layers, lowest first (checked by `tests/all/architecture/`):
//! [`core`] (documents, events, failures, limits, problems) -> [`http`],
//! `telemetry` -> [`plugin`] -> [`config`] -> [`messenger`] -> `source`
//! (sources that never end: Kafka topics, queues, pushes) -> [`run`] ->
//! [`testing`] -> [`topology`] -> [`tenancy`] (the operator file, admission,
//! run processes and their bounds) -> [`control`] (`weir serve`) and
//! [`fleet`] (`weir fleet`: workers that serve every active pipeline). A
//! module uses only those before it, and no files import each other round a
//! circle; the `weir` binary's command line sits on top. `docs/architecture.md`
//! has the map and a glossary; `docs/document-way.md` follows one document
//! through the files.
//!
//! ```no_run
//! use weir::{Document, PluginRuntime, PluginSpec, RuntimeOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = PluginRuntime::new(RuntimeOptions::default())?;
//! let spec = PluginSpec::new(
//!     "plugins/dist/copy_fields.wasm",
//!     serde_json::json!({ "mappings": [{ "source": "title", "target": "title_copy" }] }),
//! );
//! let stage = runtime.load_stage("copy-title", &spec)?;
//! assert!(stage.check_config()?.is_empty());
//! let mut instance = stage.instantiate()?; // one per worker
//! let mut doc = Document::new("doc-1");
//! doc.set("title", "Weir".into())?;
//! let children = instance.process(&mut doc)?;
//! assert!(children.is_empty());
//! assert_eq!(doc.get_string("title_copy").as_deref(), Some("Weir"));
//! # Ok(())
//! # }
//! ```

pub mod config;
pub mod control;
pub mod core;
pub mod fleet;
pub mod http;
pub mod messenger;
pub mod plugin;
pub mod run;
pub mod source;
pub(crate) mod telemetry;
pub mod tenancy;
pub mod testing;
pub mod topology;

pub use crate::config::Config;
pub use crate::core::document::{DocLimits, Document, FieldError};
pub use crate::core::problem::{Problem, Problems};
pub use crate::plugin::{
    ConnectorPlugin, IndexerPlugin, PluginError, PluginRuntime, PluginSpec, RuntimeOptions,
    StagePlugin,
};
pub use crate::run::{RunResult, RunStatus, Runner};
pub use crate::topology::{Mode, SetupError};
