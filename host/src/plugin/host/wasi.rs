//! The WASI view of a plugin's store: its WASI context and its table of
//! handles, which the `wasi:*` host implementations reach through it.

use wasmtime_wasi::{WasiCtxView, WasiView};

use super::PluginState;

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
