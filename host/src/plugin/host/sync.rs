//! The host side of the `sync` interface (contract 0.2.2): a connector's
//! state between runs, and its deletion markers.

use std::sync::Arc;

use wasmtime::component::Resource;

use super::{PluginState, Wasm};
use crate::core::document::Document;
use crate::core::limit::Limit;
use crate::plugin::bindings::syncing_connector::weir::plugin::sync;
use crate::plugin::resources::Publisher;

/// Longest key a connector may keep, in bytes.
pub const MAX_STATE_KEY_BYTES: usize = 1024;
/// Longest value a connector may keep under one key, in bytes.
pub const MAX_STATE_VALUE_BYTES: usize = 64 * 1024;
/// Most entries one `list` call answers.
pub const MAX_STATE_LIST: u32 = 4096;

/// The state a connector keeps between runs, as the run that drives it holds
/// it: reads see the connector's own changes, and each change is committed
/// once the documents published before it are done.
pub trait ConnectorState: Send + Sync {
    fn get(&self, key: &str) -> Option<String>;
    /// Up to `limit` entries after `after`, in key order.
    fn list(&self, after: Option<&str>, limit: usize) -> Vec<(String, String)>;
    /// How many keys, and the bytes of keys and values together.
    fn size(&self) -> (u64, u64);
    /// Set (`Some`) or remove (`None`) `key`, or say why not.
    fn change(&self, key: &str, value: Option<&str>) -> Result<(), String>;
    /// Whether the run sends everything again (`weir run --full`).
    fn full_sync(&self) -> bool;
}

/// Why a key or value cannot be kept, before the state is asked.
pub fn check_entry(key: &str, value: Option<&str>) -> Result<(), String> {
    if key.is_empty() {
        return Err("a state key cannot be empty".into());
    }
    if key.len() > MAX_STATE_KEY_BYTES {
        return Err(format!(
            "a state key is {} bytes, over the limit of {MAX_STATE_KEY_BYTES}",
            key.len()
        ));
    }
    if let Some(value) = value
        && value.len() > MAX_STATE_VALUE_BYTES
    {
        return Err(format!(
            "the state value of `{}` is {} bytes, over the limit of {MAX_STATE_VALUE_BYTES}",
            crate::core::text::clip_message(key.chars().take(64).collect::<String>()),
            value.len()
        ));
    }
    Ok(())
}

impl PluginState {
    fn connector_state(&self) -> Option<&Arc<dyn ConnectorState>> {
        self.sync.as_ref()
    }
}

const NO_STATE: &str =
    "this run keeps no connector state (only connectors run by `weir run` and `weir serve` do)";

impl sync::Host for PluginState {
    fn get(&mut self, key: String) -> Wasm<Option<String>> {
        Ok(self.connector_state().and_then(|s| s.get(&key)))
    }

    fn list(&mut self, after: Option<String>, limit: u32) -> Wasm<Vec<(String, String)>> {
        let limit = limit.min(MAX_STATE_LIST) as usize;
        Ok(self
            .connector_state()
            .map(|s| s.list(after.as_deref(), limit))
            .unwrap_or_default())
    }

    fn size(&mut self) -> Wasm<(u64, u64)> {
        Ok(self.connector_state().map_or((0, 0), |s| s.size()))
    }

    fn set(&mut self, key: String, value: String) -> Wasm<Result<(), String>> {
        Ok(self.change(&key, Some(&value)))
    }

    fn remove(&mut self, key: String) -> Wasm<Result<(), String>> {
        Ok(self.change(&key, None))
    }

    fn full_sync(&mut self) -> Wasm<bool> {
        Ok(self.connector_state().is_some_and(|s| s.full_sync()))
    }

    fn delete(&mut self, h: Resource<Publisher>, id: String) -> Wasm<Result<(), String>> {
        match self.deletion_marker(id) {
            Ok(marker) => self.publish_document(&h, marker),
            Err(why) => Ok(Err(why)),
        }
    }
}

impl PluginState {
    /// A deletion marker for document `id`, or why there can be none.
    pub(super) fn deletion_marker(&self, id: String) -> Result<Document, String> {
        if id.is_empty() {
            return Err("a deletion marker needs the id of the document to delete".into());
        }
        let max = self.budget.doc_limits.max_bytes;
        if id.len() > max {
            return Err(format!(
                "the id to delete is {} bytes, over the document limit of {} MiB ({})",
                id.len(),
                max >> 20,
                Limit::MaxDocumentMib
            ));
        }
        let mut marker = Document::new(id);
        marker.set_deleted(true);
        Ok(marker)
    }

    fn change(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        check_entry(key, value)?;
        match self.connector_state() {
            Some(state) => state.change(key, value),
            None => Err(NO_STATE.into()),
        }
    }
}
