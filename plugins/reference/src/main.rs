//! The plugin reference, made from the plugins' own `Config` types.
//!
//! ```sh
//! cargo run --manifest-path plugins/Cargo.toml -p plugin-reference -- --write docs/plugin-reference.md
//! cargo run --manifest-path plugins/Cargo.toml -p plugin-reference -- --check docs/plugin-reference.md
//! ```
//!
//! Without arguments it prints the reference. `--check` exits 1 when the
//! file is not what the plugins' code says (a setting added, renamed or
//! documented anew without the reference made again).

mod render;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// A bundled plugin: where it lives and the JSON Schema of its settings.
pub struct Bundled {
    pub name: &'static str,
    pub kind: &'static str,
    /// Its folder under `plugins/`.
    pub dir: &'static str,
    pub schema: schemars::Schema,
}

fn main() -> ExitCode {
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let reference = match render::reference(&bundled(), &plugins) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("plugin-reference: {e}");
            return ExitCode::from(2);
        }
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            print!("{reference}");
            ExitCode::SUCCESS
        }
        [flag, file] if flag == "--write" => match std::fs::write(file, &reference) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("plugin-reference: {file}: {e}");
                ExitCode::from(2)
            }
        },
        [flag, file] if flag == "--check" => check(&PathBuf::from(file), &reference),
        _ => {
            eprintln!("usage: plugin-reference [--write FILE | --check FILE]");
            ExitCode::from(2)
        }
    }
}

/// Exit 0 when `file` holds `reference`, else 1 with the first line that differs.
fn check(file: &Path, reference: &str) -> ExitCode {
    let current = std::fs::read_to_string(file).unwrap_or_default();
    if current == reference {
        return ExitCode::SUCCESS;
    }
    let line = current
        .lines()
        .zip(reference.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| current.lines().count().min(reference.lines().count()));
    eprintln!(
        "{} is not what the plugins' config types make (first difference at line {}): run \
         `cargo run --manifest-path plugins/Cargo.toml -p plugin-reference -- --write {}`",
        file.display(),
        line + 1,
        file.display()
    );
    ExitCode::from(1)
}
