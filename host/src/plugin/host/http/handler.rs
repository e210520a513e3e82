//! `wasi:http/outgoing-handler` as wasmtime-wasi-http 48 links it, except
//! that the request options a guest hands over are dropped once the request
//! is made. The crate only reads them, so every request sent with options
//! (a timeout) left one handle behind in the instance's table, and a plugin
//! making a request per document or per object hit the table's cap
//! (`MAX_HANDLES`, 1,024) after about a thousand requests.

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::p2::bindings::http::{outgoing_handler, types};
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostOutgoingRequest};
use wasmtime_wasi_http::{RequestOptions, WasiHttp, WasiHttpView};

use super::super::PluginState;

/// The interface's name, as the crate's WIT has it (guests' versions of
/// 0.2.x match it).
const OUTGOING_HANDLER: &str = "wasi:http/outgoing-handler@0.2.12";

type Handled = Result<Resource<HostFutureIncomingResponse>, types::ErrorCode>;

fn handle(
    state: &mut PluginState,
    request: Resource<HostOutgoingRequest>,
    options: Option<Resource<RequestOptions>>,
) -> wasmtime::Result<Handled> {
    let handed = options
        .as_ref()
        .map(|o| Resource::<RequestOptions>::new_own(o.rep()));
    let mut view = state.http();
    let sent = outgoing_handler::Host::handle(&mut view, request, options);
    if let Some(options) = handed {
        // The guest gave them up; absent already should a later version of
        // the crate delete them itself.
        let _ = view.table.delete(options);
    }
    match sent {
        Ok(response) => Ok(Ok(response)),
        // An error code is the guest's answer; anything else traps.
        Err(e) => types::Host::convert_error_code(&mut view, e).map(Err),
    }
}

/// Link `wasi:http/outgoing-handler` and `wasi:http/types` for plugins.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.instance(OUTGOING_HANDLER)?.func_wrap(
        "handle",
        |mut store,
         (request, options): (
            Resource<HostOutgoingRequest>,
            Option<Resource<RequestOptions>>,
        )| { handle(store.data_mut(), request, options).map(|handled| (handled,)) },
    )?;
    let options = wasmtime_wasi_http::p2::bindings::LinkOptions::default();
    types::add_to_linker::<_, WasiHttp>(linker, &options.into(), |s: &mut PluginState| s.http())
}
