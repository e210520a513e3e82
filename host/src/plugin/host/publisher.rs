//! The host side of the `publishing` interface: a connector's publisher
//! handle, and the sink its documents go to.

use wasmtime::component::Resource;

use super::{Handle, PluginState, Wasm};
use crate::core::document::Document;
use crate::plugin::bindings::connector;

/// Where a connector's published documents go. The host's publisher
/// implements it; `publish` blocks while the pipeline is full.
pub trait PublishSink: Send {
    /// Accept `doc`, or refuse it with a message the connector will see.
    /// Waiting for room ends at `deadline`, the end of the connector's call.
    fn publish(&mut self, doc: Document, deadline: std::time::Instant) -> Result<(), String>;
}

/// The host object behind a connector's `publisher` handle.
pub struct Publisher {
    sink: Box<dyn PublishSink>,
    run_id: String,
}

impl Publisher {
    pub(crate) fn new(sink: Box<dyn PublishSink>, run_id: String) -> Self {
        Self { sink, run_id }
    }
}

impl connector::weir::plugin::publishing::Host for PluginState {}

impl PluginState {
    /// Send `doc` through the connector's publisher `h`: refused when it is
    /// over the document limit, else as the sink answers.
    pub(super) fn publish_document(
        &mut self,
        h: &Resource<Publisher>,
        mut doc: Document,
    ) -> Wasm<Result<(), String>> {
        let bytes = doc.approx_json_bytes();
        let max = self.budget.doc_limits.max_bytes;
        if bytes > max {
            // A copy of a child built under larger limits, say.
            return Ok(Err(format!(
                "document `{}` is about {bytes} bytes, over the limit of {} MiB (limits.max_document_mib)",
                doc.id(),
                max >> 20
            )));
        }
        // The call's deadline (kept for HTTP too): waiting for room in a full
        // pipeline must not outlast it.
        let deadline = self
            .http_policy
            .deadline
            .unwrap_or_else(|| std::time::Instant::now() + std::time::Duration::from_secs(1));
        let publisher = self.table.get_mut(h)?;
        doc.set_run_id(Some(publisher.run_id.clone()));
        Ok(publisher.sink.publish(doc, deadline))
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
