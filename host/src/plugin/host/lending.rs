//! The host side of the `lending` interface (contract 0.2.1): the documents
//! of a `process-lent` call as one `batch`, addressed by position.
//!
//! The batch's reads and changes are those of `fields` over every lent
//! document in order (the same code, bounds and journal); a handle on one
//! document is lent only when the plugin asks for it, and counts as held
//! until it is dropped, as a `process-batch` handle does.

use wasmtime::component::Resource;

use super::{Handle, PluginState, Wasm};
use crate::core::limit::Limit;
use crate::plugin::bindings::FieldError;
use crate::plugin::bindings::batch_stage::weir::plugin::fields::Host as _;
use crate::plugin::bindings::lent_stage::weir::plugin::lending::{Host, HostBatch};
use crate::plugin::resources::LentBatch;

impl PluginState {
    /// Borrowed handles on the lent documents, in order.
    pub(super) fn lent_handles(&self) -> Vec<Handle> {
        self.journal
            .order()
            .iter()
            .map(|&rep| Resource::new_borrow(rep))
            .collect()
    }
}

impl HostBatch for PluginState {
    fn size(&mut self, _: Resource<LentBatch>) -> Wasm<u32> {
        Ok(u32::try_from(self.journal.order().len())?)
    }

    fn ids(&mut self, _: Resource<LentBatch>) -> Wasm<Vec<String>> {
        self.lent_handles()
            .iter()
            .map(|h| Ok(self.doc(h)?.id().to_owned()))
            .collect()
    }

    fn get_json(&mut self, _: Resource<LentBatch>, names: Vec<String>) -> Wasm<String> {
        let docs = self.lent_handles();
        self.get_json_each_text(docs, names)
    }

    fn update(&mut self, _: Resource<LentBatch>, changes: String) -> Wasm<Vec<(u32, FieldError)>> {
        let docs = self.lent_handles();
        let results = self.update_each_text(docs, changes)?;
        Ok((0u32..)
            .zip(results)
            .filter_map(|(at, result)| result.err().map(|e| (at, e)))
            .collect())
    }

    fn document(&mut self, _: Resource<LentBatch>, at: u32) -> Wasm<Handle> {
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        let size = self.journal.order().len();
        match self.journal.hand(at) {
            Ok(rep) => Ok(Resource::new_own(rep)),
            // A limit of the contract, named as the host's own (the engine
            // has room for every handle it allows: see `lent_handles`).
            Err(why) if at < size => Err(self.budget.refuse(Limit::Handles, why)),
            Err(why) => Err(wasmtime::format_err!("{why}")),
        }
    }

    fn drop(&mut self, _: Resource<LentBatch>) -> Wasm<()> {
        Ok(())
    }
}

impl Host for PluginState {}
