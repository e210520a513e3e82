//! Stages that take documents in batches: the `batch-stage` world of
//! contract 0.2.1.
//!
//! The host hands a batch stage several documents in one `process-batch`
//! call (how many, and how long it waits to fill a batch, are the stage's
//! `batch = { size, wait }` settings), and the stage says what became of
//! each one: an [`Outcome`] per document, in order. One call per batch
//! instead of one per document is most of what a small stage costs, so
//! [`export_stage!`](crate::export_stage) exports per-document [`Stage`]s
//! through this world too, calling [`Stage::process`] for each document of
//! the batch.

use crate::{Document, PluginError, Stage};

pub use crate::bindings::batch_stage::exports::weir::plugin::stage_batch_api::Outcome;

/// A stage that processes a batch of documents per call.
///
/// A batch holds from one document up; the host may split or regroup
/// batches at any time (a batch that traps is retried one document at a
/// time), so the outcome of a document must not depend on which others
/// share its batch.
pub trait BatchStage: Sized + 'static {
    /// The stage's settings, parsed from the pipeline config.
    type Config: serde::de::DeserializeOwned;
    /// Checks beyond parsing (ranges, regex syntax, ...), all reported at once.
    fn check(_config: &Self::Config) -> Vec<crate::ConfigIssue> {
        Vec::new()
    }
    /// Build the stage from its settings.
    fn start(config: Self::Config) -> Result<Self, String>;
    /// Change `docs` in place, in order, and say what became of each: one
    /// [`Outcome`] per document, in the order of `docs` ([`per_document`]
    /// builds them from a function of one document). An error fails every
    /// document of the batch with it: return one only when the whole batch
    /// cannot be processed (a service it needs is down: transient).
    ///
    /// The documents are lent for the call: they cannot be kept, and one
    /// returned as a child is copied.
    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError>;
    fn stop(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}

impl Outcome {
    /// Processed, with no child documents: the usual outcome.
    pub fn done() -> Self {
        Outcome::Done(Vec::new())
    }
}

impl From<Result<Vec<Document>, PluginError>> for Outcome {
    /// What a per-document result says: its children, or its error.
    fn from(result: Result<Vec<Document>, PluginError>) -> Self {
        match result {
            Ok(children) => Outcome::Done(children),
            Err(error) => Outcome::Failed(error),
        }
    }
}

impl From<Result<(), PluginError>> for Outcome {
    /// Processed with no children, or failed with the error.
    fn from(result: Result<(), PluginError>) -> Self {
        match result {
            Ok(()) => Outcome::done(),
            Err(error) => Outcome::Failed(error),
        }
    }
}

/// The outcomes of `process` applied to each of `docs` in order: for a batch
/// stage whose work is per document (most are), so that an error fails only
/// the document it came from.
pub fn per_document<R: Into<Outcome>>(
    docs: &[Document],
    mut process: impl FnMut(&Document) -> R,
) -> Vec<Outcome> {
    docs.iter().map(|doc| process(doc).into()).collect()
}

/// A [`Stage`] as a batch stage: [`Stage::process`] on each document.
#[doc(hidden)]
pub fn __process_each<S: Stage>(stage: &mut S, docs: &[Document]) -> Vec<Outcome> {
    per_document(docs, |doc| stage.process(doc))
}

/// Export a [`BatchStage`] implementation as the component's stage (world
/// `batch-stage`).
#[macro_export]
macro_rules! export_batch_stage {
    ($ty:ty) => {
        $crate::__weir_stage_exports!($ty, $crate::BatchStage, |stage, docs| {
            $crate::BatchStage::process_batch(stage, docs)
        });
    };
}

/// Export a [`Stage`] implementation as the component's stage: through the
/// `batch-stage` world, [`Stage::process`] on each document of a batch.
#[macro_export]
macro_rules! export_stage {
    ($ty:ty) => {
        $crate::__weir_stage_exports!($ty, $crate::Stage, |stage, docs| {
            Ok($crate::__process_each(stage, docs))
        });
    };
}

/// The `stage-batch-api` exports for `$ty`, a `$trait` ([`Stage`] or
/// [`BatchStage`]; both have `Config`, `check`, `start` and `stop`), with
/// `$process` turning `(&mut $ty, &[Document])` into the batch's outcomes.
#[doc(hidden)]
#[macro_export]
macro_rules! __weir_stage_exports {
    ($ty:ty, $trait:path, $process:expr) => {
        ::std::thread_local! {
            static __WEIR_STAGE: ::std::cell::RefCell<Option<$ty>> = const { ::std::cell::RefCell::new(None) };
        }
        #[doc(hidden)]
        pub struct __WeirStage;
        impl $crate::bindings::batch_stage::exports::weir::plugin::stage_batch_api::Guest for __WeirStage {
            fn check_config(config: String) -> Vec<$crate::ConfigIssue> {
                $crate::check_config::<<$ty as $trait>::Config>(&config, <$ty as $trait>::check)
            }
            fn start(config: String) -> Result<(), $crate::PluginError> {
                let config = $crate::__checked_config(&config, <$ty as $trait>::check)?;
                let stage = <$ty as $trait>::start(config).map_err($crate::PluginError::Fatal)?;
                __WEIR_STAGE.with(|s| *s.borrow_mut() = Some(stage));
                Ok(())
            }
            fn process_batch(
                docs: Vec<$crate::Document>,
            ) -> Result<Vec<$crate::Outcome>, $crate::PluginError> {
                let process: fn(&mut $ty, &[$crate::Document]) -> Result<Vec<$crate::Outcome>, $crate::PluginError> = $process;
                // The handles are dropped when `docs` goes out of scope,
                // after the outcomes are built: the documents stay the host's.
                __WEIR_STAGE.with(|s| match s.borrow_mut().as_mut() {
                    Some(stage) => process(stage, &docs),
                    None => Err($crate::__not_started()),
                })
            }
            fn stop() -> Result<(), $crate::PluginError> {
                __WEIR_STAGE.with(|s| match s.borrow_mut().take() {
                    Some(mut stage) => <$ty as $trait>::stop(&mut stage),
                    None => Ok(()),
                })
            }
        }
        $crate::bindings::batch_stage::__export_batch_stage_world!(__WeirStage with_types_in $crate::bindings::batch_stage);
    };
}

/// Export a [`FieldStage`](crate::FieldStage) implementation as the
/// component's stage: `stage-batch-api` (world `batch-stage`) and
/// `stage-lent-api` with the batch's fields packed (world `packing-stage`),
/// so a host lends it batches by position.
#[macro_export]
macro_rules! export_field_stage {
    ($ty:ty) => {
        $crate::__weir_stage_exports!($ty, $crate::FieldStage, |stage, docs| {
            Ok($crate::__field_batch(stage, docs))
        });
        impl $crate::bindings::field_stage::exports::weir::plugin::stage_lent_api::Guest for __WeirStage {
            fn process_lent(
                batch: &$crate::bindings::field_stage::weir::plugin::lending::Batch,
            ) -> Result<
                Vec<(u32, $crate::bindings::field_stage::exports::weir::plugin::stage_lent_api::Outcome)>,
                $crate::PluginError,
            > {
                use $crate::bindings::field_stage::exports::weir::plugin::stage_lent_api::Outcome;
                __WEIR_STAGE.with(|s| match s.borrow_mut().as_mut() {
                    Some(stage) => Ok($crate::__field_lent(stage, batch)
                        .into_iter()
                        .map(|(at, error)| (at, Outcome::Failed(error)))
                        .collect()),
                    None => Err($crate::__not_started()),
                })
            }
        }
        $crate::bindings::field_stage::__export_field_stage_world!(__WeirStage with_types_in $crate::bindings::field_stage);
    };
}
