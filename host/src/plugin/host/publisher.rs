//! The host side of the `publishing` interface: what a connector's
//! publisher handle ([`Publisher`]) does with the documents it is given.

use wasmtime::component::Resource;

use super::{Handle, PluginState, Wasm};
use crate::core::document::Document;
use crate::plugin::bindings::connector;
use crate::plugin::resources::Publisher;

impl connector::weir::plugin::publishing::Host for PluginState {}

impl PluginState {
    /// Send `doc` through the connector's publisher `h`: refused when it is
    /// over the document limit, else as the sink answers.
    pub(super) fn publish_document(
        &mut self,
        h: &Resource<Publisher>,
        doc: Document,
    ) -> Wasm<Result<(), String>> {
        let bytes = doc.approx_json_bytes();
        let max = self.budget.doc_limits.max_bytes;
        if bytes > max {
            // A copy of a child built under larger limits, say.
            return Ok(Err(format!(
                "document `{}` is about {bytes} bytes, over the limit of {} MiB ({})",
                doc.id(),
                max >> 20,
                crate::core::limit::Limit::MaxDocumentMib
            )));
        }
        // The call's deadline (kept for HTTP too): waiting for room in a full
        // pipeline must not outlast it.
        let deadline = self
            .http_policy
            .deadline
            .unwrap_or_else(|| std::time::Instant::now() + std::time::Duration::from_secs(1));
        Ok(self.table.get_mut(h)?.publish(doc, deadline))
    }
}

impl connector::weir::plugin::publishing::HostPublisher for PluginState {
    fn publish(&mut self, h: Resource<Publisher>, doc: Handle) -> Wasm<Result<(), String>> {
        // Handed over: no longer held by the connector, published or not.
        let doc = self.take_back(doc)?;
        self.publish_document(&h, doc)
    }

    fn drop(&mut self, h: Resource<Publisher>) -> Wasm<()> {
        self.table.delete(h)?;
        Ok(())
    }
}
