//! The batch stage's world: `stage-batch-api`, and the batches handed by
//! position (`stage-lent-api`, 0.2.1) when the stage exports it.
//!
//! `process-batch` lends each document as a handle of its own, and guests
//! whose bindings make an object per handle (Python, JavaScript) pay for
//! each. A stage that exports `stage-lent-api` beside `stage-batch-api` is
//! called with one `batch` handle instead (`host::lending`), and answers
//! only the documents that did more than change in place.

use std::ops::Deref;

use wasmtime::Store;
use wasmtime::component::{Func, Resource};

use super::bindings::batch_stage::{BatchStage, BatchStagePre};
use super::bindings::{BatchOutcome, GuestError};
use super::host::PluginState;
use super::instance::{World, typed_export};
use super::resources::LentBatch;

/// The interface a stage exports beside `stage-batch-api` to be lent by position.
const LENT_EXPORT: &str = "weir:plugin/stage-lent-api@0.2.5";

/// What `process-lent` answers: the outcomes of the documents it lists.
/// Its `outcome` has the shape of `stage-batch-api`'s (checked when the
/// instance is made), so both answers lift into one type.
pub(crate) type Answer = Result<Vec<(u32, BatchOutcome)>, GuestError>;

/// A batch stage instance: `stage-batch-api`, and `process-lent` when the
/// component exports it.
pub(crate) struct BatchWorld {
    api: BatchStage,
    lent: Option<Func>,
}

impl Deref for BatchWorld {
    type Target = BatchStage;
    fn deref(&self) -> &BatchStage {
        &self.api
    }
}

impl BatchWorld {
    /// Whether the instance takes its batches by position.
    pub(crate) fn lends(&self) -> bool {
        self.lent.is_some()
    }

    /// `process-lent` of the batch lent for this call.
    pub(crate) async fn process_lent(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Answer> {
        let func = self
            .lent
            .ok_or_else(|| wasmtime::format_err!("the plugin exports no `process-lent`"))?;
        let typed = func.typed::<(Resource<LentBatch>,), (Answer,)>(&*store)?;
        let (answer,) = typed
            .call_async(&mut *store, (Resource::new_borrow(0),))
            .await?;
        Ok(answer)
    }
}

impl World for BatchWorld {
    const KIND: &'static str = "stage";
    const API: &'static str = "stage-batch-api";
    type Pre = BatchStagePre<PluginState>;
    type Started = ();

    fn pre(pre: wasmtime::component::InstancePre<PluginState>) -> wasmtime::Result<Self::Pre> {
        BatchStagePre::new(pre)
    }

    async fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Self> {
        let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
        let api = BatchStage::new(&mut *store, &instance)?;
        let lent = typed_export::<(Resource<LentBatch>,), (Answer,)>(
            &instance,
            store,
            LENT_EXPORT,
            "process-lent",
        )?;
        Ok(Self { api, lent })
    }

    async fn start(
        &self,
        store: &mut Store<PluginState>,
        config: &str,
    ) -> wasmtime::Result<Result<(), GuestError>> {
        self.weir_plugin_stage_batch_api()
            .call_start(store, config)
            .await
    }
}
