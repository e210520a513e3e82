//! `weir`: run and validate ingestion configs. See `weir --help`.

use std::io::IsTerminal;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// Documents are made on one thread and freed on another; mimalloc handles
/// that pattern far better than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,wasmtime=warn,cranelift=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    ExitCode::from(weir::cli::run(std::env::args_os()))
}
