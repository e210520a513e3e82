//! `weir`: run and validate ingestion configs. See `weir --help`.

mod cli;

use std::process::ExitCode;

/// Documents are made on one thread and freed on another; mimalloc handles
/// that pattern far better than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ExitCode::from(cli::run(std::env::args_os()))
}
