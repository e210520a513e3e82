//! Indexers: the [`Indexer`] trait a backend implements, what it asks of
//! each batch ([`whole_json`], [`picked`]), its refusals ([`failure`],
//! [`batch_error`]), which of a pipeline's instances it is, and
//! [`export_indexer!`](crate::export_indexer), which exports it through the
//! `packed-indexer` world.

use serde::de::DeserializeOwned;

use crate::{
    BatchEntry, BatchError, BatchFormat, ConfigIssue, DocumentFailure, Packed, PluginError,
};

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
