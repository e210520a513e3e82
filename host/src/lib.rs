//! # Weir
//!
//! Weir moves documents from sources into search engines. A run is
//! connector -> stages -> indexer, and each of those is a sandboxed
//! WebAssembly component written against the WIT contract in `wit/`.
//!
//! The core ideas, from the bottom up:
//!
//! - [`Document`](document::Document): an id, a run id and JSON fields. It
//!   lives in the host; plugins touch it through handle methods, so a stage
//!   pays only for the fields it reads or writes.
//! - [`PluginRuntime`](plugin::PluginRuntime): loads components (compiled once,
//!   cached on disk), and makes sandboxed instances: a memory cap, a deadline
//!   per call, and only the files, environment and HTTP hosts the config grants.
//!   A plugin that traps fails the document it was working on; its instance is
//!   replaced and the host goes on.
//! - Plugin kinds: [`StagePlugin`](plugin::StagePlugin) changes documents,
//!   [`ConnectorPlugin`](plugin::ConnectorPlugin) publishes them,
//!   [`IndexerPlugin`](plugin::IndexerPlugin) sends batches to a backend.
//!
//! ```no_run
//! use weir::document::Document;
//! use weir::plugin::{PluginRuntime, PluginSpec, RuntimeOptions};
//!
//! # fn main() -> anyhow::Result<()> {
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

pub mod cli;
pub mod config;
pub mod control;
pub mod core;
pub mod document;
pub mod event;
pub mod http;
pub mod messenger;
pub mod plugin;
pub mod run;
pub mod scaffold;
pub mod telemetry;
pub mod testing;
