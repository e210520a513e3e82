//! Write Weir plugins in Rust.
//!
//! The bindings for the plugin worlds of `weir:plugin@0.2.2` live here: a
//! trait and an export macro per kind, and small helpers: typed configs
//! ([`parse_config`]), logging macros, value conversions, and reading and
//! writing several fields of a document in one call
//! ([`Document::get_all_many`], [`Document::update`]).
//!
//! Stages come in two shapes, both exported through the `batch-stage`
//! world, which hands a stage a batch of documents per call:
//!
//! - [`BatchStage`] ([`export_batch_stage!`]): the whole batch at once, an
//!   [`Outcome`] per document.
//! - [`Stage`] ([`export_stage!`]): one document at a time; the SDK calls
//!   [`Stage::process`] for each document of a batch.
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
                "weir:plugin/types@0.2.2": super::stage::weir::plugin::types,
                "weir:plugin/log@0.2.2": super::stage::weir::plugin::log,
                "weir:plugin/document@0.2.2": super::stage::weir::plugin::document,
            },
        });
    }
    /// Connectors are built for `syncing-connector`: a connector that never
    /// calls [`crate::sync`] imports nothing more than `connector` does.
    pub mod connector {
        wit_bindgen::generate!({
            world: "syncing-connector",
            path: "../../wit",
            pub_export_macro: true,
            export_macro_name: "__export_connector_world",
            default_bindings_module: "weir_plugin::bindings::connector",
            with: {
                "weir:plugin/types@0.2.2": super::stage::weir::plugin::types,
                "weir:plugin/log@0.2.2": super::stage::weir::plugin::log,
                "weir:plugin/document@0.2.2": super::stage::weir::plugin::document,
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
                "weir:plugin/types@0.2.2": super::stage::weir::plugin::types,
                "weir:plugin/log@0.2.2": super::stage::weir::plugin::log,
            },
        });
    }
}

mod batch;
pub mod cache;
mod fields;
mod packed;
pub mod sql;
pub mod sweep;
pub mod sync;
mod values;

#[doc(hidden)]
pub use batch::__process_each;
pub use batch::{BatchStage, Outcome, per_document};
pub use fields::{Change, FieldChange, get_json_each, update_batch, update_each};
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

/// A connector: reads a source and publishes documents.
pub trait Connector: Sized + 'static {
    type Config: DeserializeOwned;
    fn check(_config: &Self::Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    fn pre_execute(config: Self::Config, run_id: &str) -> Result<Self, PluginError>;
    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError>;
    fn post_execute(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}

/// An indexer backend: sends batches of documents to a search engine.
pub trait Indexer: Sized + 'static {
    type Config: DeserializeOwned;
    fn check(_config: &Self::Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    fn start(config: Self::Config) -> Result<Self, String>;
    /// What each batch entry should carry; by default the whole document as
    /// JSON text ([`whole_json`]).
    fn batch_format(&self) -> BatchFormat {
        whole_json()
    }
    fn validate_connection(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
    /// Index `batch` in order (a later entry for an id is a later version);
    /// return the entries the backend refused, by position.
    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError>;
    /// [`Indexer::index_batch`] of a batch read in place, as hosts of
    /// contract 0.2.1 hand batches over: entries borrow their text from the
    /// batch. By default each entry is copied into a [`BatchEntry`] for
    /// `index_batch` (still cheaper than the host handing each string over);
    /// a backend that writes entries out as it reads them implements this
    /// to skip the copies.
    fn index_packed(&mut self, batch: &Packed<'_>) -> Result<Vec<DocumentFailure>, BatchError> {
        self.index_batch(batch.to_entries())
    }
    fn close(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}

/// Which of a pipeline's indexer instances this is (`indexer.instances`):
/// `(index, count)`, index from 0. The host routes each id to one instance,
/// so instances never share a document; they may share a backend that
/// takes writes from many clients, not a file.
pub fn indexer_instance() -> (usize, usize) {
    let read = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let count = read("WEIR_INDEXER_INSTANCES").unwrap_or(1usize).max(1);
    (read("WEIR_INDEXER_INSTANCE").unwrap_or(0usize), count)
}

/// A file path for this indexer instance: `{instance}` in `template` becomes
/// its index. Several instances writing one file would interleave and
/// truncate each other's output, so with more than one, `template` must
/// hold `{instance}`.
pub fn instance_path(template: &str) -> Result<String, String> {
    let (index, count) = indexer_instance();
    if count > 1 && !template.contains("{instance}") {
        return Err(format!(
            "path `{template}` would be written by all {count} indexer instances (indexer.instances): \
             put `{{instance}}` in it, e.g. `out-{{instance}}.jsonl`"
        ));
    }
    Ok(template.replace("{instance}", &index.to_string()))
}

/// Batches of whole documents as JSON text.
pub fn whole_json() -> BatchFormat {
    BatchFormat {
        json: true,
        fields: None,
        omit: Vec::new(),
        pick: Vec::new(),
    }
}

/// Batches of the values of `fields` as text, no JSON.
pub fn picked(fields: Vec<String>) -> BatchFormat {
    BatchFormat {
        json: false,
        fields: None,
        omit: Vec::new(),
        pick: fields,
    }
}

/// A refusal of the entry at `index`, not transient.
pub fn failure(index: usize, message: impl Into<String>) -> DocumentFailure {
    DocumentFailure {
        index: u32::try_from(index).unwrap_or(u32::MAX),
        message: message.into(),
        status: None,
        transient: false,
    }
}

/// A batch error that is neither a retryable status nor a lost connection.
pub fn batch_error(message: impl Into<String>) -> BatchError {
    BatchError {
        message: message.into(),
        status: None,
        connection_failed: false,
    }
}

/// Parse a plugin config, naming the offending setting on error.
pub fn parse_config<C: DeserializeOwned>(config: &str) -> Result<C, ConfigIssue> {
    let mut de = serde_json::Deserializer::from_str(config);
    serde_path_to_error::deserialize(&mut de).map_err(|e| ConfigIssue {
        path: match e.path().to_string() {
            p if p == "." => String::new(),
            p => p,
        },
        message: e.inner().to_string(),
    })
}

/// Every issue in `config`: parse errors, then the plugin's own checks.
pub fn check_config<C: DeserializeOwned>(
    config: &str,
    check: fn(&C) -> Vec<ConfigIssue>,
) -> Vec<ConfigIssue> {
    match parse_config::<C>(config) {
        Ok(parsed) => check(&parsed),
        Err(issue) => vec![issue],
    }
}

/// A config issue at `path`.
pub fn issue(path: impl Into<String>, message: impl Into<String>) -> ConfigIssue {
    ConfigIssue {
        path: path.into(),
        message: message.into(),
    }
}

/// Fields the host keeps for itself: a stage cannot set or delete them.
pub const RESERVED_FIELDS: [&str; 4] = ["id", "run_id", "_children", DELETED_FIELD];

/// What an indexer picks (`BatchFormat::pick`) to be told deletion markers
/// (see [`sync::delete`]): `["true"]` for a marker, nothing otherwise. The
/// host never sends markers to an indexer that does not pick it.
pub const DELETED_FIELD: &str = "_deleted";

/// Issues for the reserved fields (`RESERVED_FIELDS`) among the field
/// names a setting lists as fields to write or delete: caught at
/// validation, not by failing every document.
pub fn reserved_field_issues(setting: &str, fields: &[String]) -> Vec<ConfigIssue> {
    fields
        .iter()
        .enumerate()
        .filter(|(_, field)| RESERVED_FIELDS.contains(&field.as_str()))
        .map(|(i, field)| {
            issue(
                format!("{setting}[{i}]"),
                format!("`{field}` is kept by the host: a stage cannot change it"),
            )
        })
        .collect()
}

/// A document-level error from a field error: the document fails, the run goes on.
pub fn doc_error(error: FieldError) -> PluginError {
    PluginError::Document(field_error_message(&error))
}

/// A readable message for a field error.
pub fn field_error_message(error: &FieldError) -> String {
    match error {
        FieldError::ReservedField(m) => format!("reserved field: {m}"),
        FieldError::WrongType(m) => format!("wrong type: {m}"),
        FieldError::InvalidPath(m) => format!("invalid path: {m}"),
        FieldError::InvalidJson(m) => format!("invalid JSON: {m}"),
        FieldError::TooLarge(m) => format!("too large: {m}"),
    }
}

impl Value {
    /// The value as text, like `Document::get_string` (None for null).
    pub fn to_text(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Boolean(b) => b.to_string(),
            Value::Integer(i) => i.to_string(),
            // As the host renders it (`1.0`, `1e-7`).
            Value::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(|| f.to_string(), |n| n.to_string())
            }
            Value::Text(s) | Value::Number(s) | Value::Json(s) => s.clone(),
        })
    }

    /// The value as JSON (numbers exactly as they are).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Boolean(b) => (*b).into(),
            Value::Integer(i) => (*i).into(),
            Value::Float(f) => (*f).into(),
            Value::Text(s) => s.clone().into(),
            Value::Number(s) | Value::Json(s) => {
                serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
            }
        }
    }

    /// A value from JSON: scalars as themselves, arrays and objects as JSON
    /// text; a number beyond s64 as its exact text.
    pub fn from_json(json: &serde_json::Value) -> Self {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Boolean(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Integer(i),
                None => Value::Json(n.to_string()),
            },
            serde_json::Value::String(s) => Value::Text(s.clone()),
            other => Value::Json(other.to_string()),
        }
    }
}

/// Log through the host at `level`.
pub fn log(level: Level, message: &str) {
    bindings::stage::weir::plugin::log::log(level, message);
}

/// Whether the host records messages at `level`.
pub fn log_enabled(level: Level) -> bool {
    bindings::stage::weir::plugin::log::enabled(level)
}

/// `info!("...", args)`: log at info level through the host.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::Level::Info, &format!($($arg)*)) };
}

/// `warn!("...", args)`: log at warn level through the host.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &format!($($arg)*)) };
}

/// `debug!("...", args)`: log at debug level, formatting only when enabled.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::log_enabled($crate::Level::Debug) {
            $crate::log($crate::Level::Debug, &format!($($arg)*))
        }
    };
}

/// The parsed config, or a fatal error listing every problem (parse error,
/// or the plugin's own checks): what `start` and `pre-execute` refuse.
#[doc(hidden)]
pub fn __checked_config<C: DeserializeOwned>(
    config: &str,
    check: fn(&C) -> Vec<ConfigIssue>,
) -> Result<C, PluginError> {
    let describe = |issues: &[ConfigIssue]| {
        issues
            .iter()
            .map(|i| {
                format!(
                    "{}: {}",
                    if i.path.is_empty() {
                        "(config)"
                    } else {
                        &i.path
                    },
                    i.message
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let parsed = parse_config::<C>(config)
        .map_err(|i| PluginError::Fatal(format!("invalid config: {}", describe(&[i]))))?;
    match check(&parsed) {
        issues if issues.is_empty() => Ok(parsed),
        issues => Err(PluginError::Fatal(format!(
            "invalid config: {}",
            describe(&issues)
        ))),
    }
}

#[doc(hidden)]
pub fn __not_started() -> PluginError {
    PluginError::Fatal("the host called the plugin before `start`".into())
}

/// Export a [`Connector`] implementation as the component's connector.
#[macro_export]
macro_rules! export_connector {
    ($ty:ty) => {
        ::std::thread_local! {
            static __WEIR_CONNECTOR: ::std::cell::RefCell<Option<$ty>> = const { ::std::cell::RefCell::new(None) };
        }
        #[doc(hidden)]
        pub struct __WeirConnector;
        impl __WeirConnector {
            fn with(
                f: impl FnOnce(&mut $ty) -> Result<(), $crate::PluginError>,
            ) -> Result<(), $crate::PluginError> {
                __WEIR_CONNECTOR.with(|s| match s.borrow_mut().as_mut() {
                    Some(connector) => f(connector),
                    None => Err($crate::__not_started()),
                })
            }
        }
        impl $crate::bindings::connector::exports::weir::plugin::connector_api::Guest for __WeirConnector {
            fn check_config(config: String) -> Vec<$crate::ConfigIssue> {
                $crate::check_config::<<$ty as $crate::Connector>::Config>(&config, <$ty as $crate::Connector>::check)
            }
            fn pre_execute(config: String, run_id: String) -> Result<(), $crate::PluginError> {
                let config = $crate::__checked_config(&config, <$ty as $crate::Connector>::check)?;
                let connector = <$ty as $crate::Connector>::pre_execute(config, &run_id)?;
                __WEIR_CONNECTOR.with(|s| *s.borrow_mut() = Some(connector));
                Ok(())
            }
            fn execute(publisher: &$crate::Publisher) -> Result<(), $crate::PluginError> {
                Self::with(|c| $crate::Connector::execute(c, publisher))
            }
            fn post_execute() -> Result<(), $crate::PluginError> {
                Self::with($crate::Connector::post_execute)
            }
            fn close() -> Result<(), $crate::PluginError> {
                __WEIR_CONNECTOR.with(|s| match s.borrow_mut().take() {
                    Some(mut connector) => $crate::Connector::close(&mut connector),
                    None => Ok(()),
                })
            }
        }
        $crate::bindings::connector::__export_connector_world!(__WeirConnector with_types_in $crate::bindings::connector);
    };
}

/// Export an [`Indexer`] implementation as the component's indexer.
#[macro_export]
macro_rules! export_indexer {
    ($ty:ty) => {
        ::std::thread_local! {
            static __WEIR_INDEXER: ::std::cell::RefCell<Option<$ty>> = const { ::std::cell::RefCell::new(None) };
            /// How many fields the batch format picks: what a packed entry holds.
            static __WEIR_PICKS: ::std::cell::Cell<usize> = const { ::std::cell::Cell::new(0) };
        }
        #[doc(hidden)]
        pub struct __WeirIndexer;
        impl __WeirIndexer {
            fn with<R>(
                f: impl FnOnce(&mut $ty) -> Result<R, $crate::PluginError>,
            ) -> Result<R, $crate::PluginError> {
                __WEIR_INDEXER.with(|s| match s.borrow_mut().as_mut() {
                    Some(indexer) => f(indexer),
                    None => Err($crate::__not_started()),
                })
            }
        }
        impl $crate::bindings::indexer::exports::weir::plugin::indexer_api::Guest for __WeirIndexer {
            fn check_config(config: String) -> Vec<$crate::ConfigIssue> {
                $crate::check_config::<<$ty as $crate::Indexer>::Config>(&config, <$ty as $crate::Indexer>::check)
            }
            fn start(config: String) -> Result<$crate::BatchFormat, $crate::PluginError> {
                let config = $crate::__checked_config(&config, <$ty as $crate::Indexer>::check)?;
                let indexer = <$ty as $crate::Indexer>::start(config).map_err($crate::PluginError::Fatal)?;
                let format = $crate::Indexer::batch_format(&indexer);
                __WEIR_PICKS.with(|p| p.set(format.pick.len()));
                __WEIR_INDEXER.with(|s| *s.borrow_mut() = Some(indexer));
                Ok(format)
            }
            fn validate_connection() -> Result<(), $crate::PluginError> {
                Self::with($crate::Indexer::validate_connection)
            }
            fn index_batch(batch: Vec<$crate::BatchEntry>) -> Result<Vec<$crate::DocumentFailure>, $crate::BatchError> {
                __WEIR_INDEXER.with(|s| match s.borrow_mut().as_mut() {
                    Some(indexer) => $crate::Indexer::index_batch(indexer, batch),
                    None => Err($crate::batch_error("the host called the plugin before `start`")),
                })
            }
            fn close() -> Result<(), $crate::PluginError> {
                __WEIR_INDEXER.with(|s| match s.borrow_mut().take() {
                    Some(mut indexer) => $crate::Indexer::close(&mut indexer),
                    None => Ok(()),
                })
            }
        }
        impl $crate::bindings::indexer::exports::weir::plugin::indexer_packed_api::Guest for __WeirIndexer {
            fn index_packed(
                batch: $crate::bindings::indexer::exports::weir::plugin::indexer_packed_api::PackedBatch,
            ) -> Result<Vec<$crate::DocumentFailure>, $crate::BatchError> {
                let packed = $crate::Packed::read(&batch, __WEIR_PICKS.with(|p| p.get()))?;
                __WEIR_INDEXER.with(|s| match s.borrow_mut().as_mut() {
                    Some(indexer) => $crate::Indexer::index_packed(indexer, &packed),
                    None => Err($crate::batch_error("the host called the plugin before `start`")),
                })
            }
        }
        $crate::bindings::indexer::__export_indexer_world!(__WeirIndexer with_types_in $crate::bindings::indexer);
    };
}

/// A `{ source = "...", target = "..." }` pair: the shape of the `mappings`
/// setting of stages that move values from one field to another.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldMapping {
    /// The field values are read from.
    pub source: String,
    /// The field the results are written to.
    pub target: String,
}

/// How a stage writes to a field that may already have values; the `mode`
/// setting of several stages (`"overwrite"`, `"append"`, `"skip"`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Replace existing values.
    #[default]
    Overwrite,
    /// Add to existing values (the field becomes multi-valued).
    Append,
    /// Leave a field that already exists untouched.
    Skip,
}

impl From<Mode> for UpdateMode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Overwrite => UpdateMode::Overwrite,
            Mode::Append => UpdateMode::Append,
            Mode::Skip => UpdateMode::Skip,
        }
    }
}

/// Write `values` to `name` according to `mode`. One value is stored
/// single-valued, several as a multi-valued field.
pub fn update(
    doc: &Document,
    name: &str,
    mut values: Vec<Value>,
    mode: Mode,
) -> Result<(), FieldError> {
    match mode {
        Mode::Skip if doc.has(name) => Ok(()),
        Mode::Append => values.into_iter().try_for_each(|v| doc.add(name, &v)),
        _ if values.len() == 1 => doc.set(name, &values.remove(0)),
        _ => doc.set_all(name, &values),
    }
}

/// The text of the file at `path` (in a folder granted to the plugin), read
/// as UTF-8, of at most `max_mib` MiB: a dictionary or a list a stage loads
/// at `start`. `what` names it in errors ("dictionary", "terms file").
pub fn read_text_file(what: &str, path: &str, max_mib: u64) -> Result<String, String> {
    use std::io::Read;
    let limit = max_mib << 20;
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(|e| format!("cannot open {what} `{path}`: {e}"))?
        .take(limit + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {what} `{path}` as UTF-8 text: {e}"))?;
    if text.len() as u64 > limit {
        return Err(format!(
            "{what} `{path}` is larger than max_file_mib ({max_mib} MiB)"
        ));
    }
    Ok(text)
}
