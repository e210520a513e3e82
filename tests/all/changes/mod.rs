//! Changing pipelines safely: pipeline tests (`weir test <config>`), live
//! reload of a running `weir run` (SIGHUP and `--watch`), shadow stages and
//! `weir tap` (a process's ops server, and a tenant's run in `weir serve`).
//! The Kafka worker reload is in `kafka.rs`, with the cluster it needs.
//! One file per tool; the helpers they share are here.

use std::path::{Path, PathBuf};

use serde_json::Value;
use weir_tests::{Proc, plugins_dir, with_plugins};

mod cases;
mod reload;
mod serve;
mod shadow;
mod tap;

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// `weir args...`: exit code and everything it printed.
pub(crate) fn weir(args: &[&str]) -> (u8, String) {
    let output = std::process::Command::new(WEIR)
        .args(args)
        .output()
        .expect("the weir binary starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let code = output.status.code().and_then(|c| u8::try_from(c).ok());
    (code.expect("weir exits with a code"), text)
}

/// The text of `example` with its plugin paths pointed at the built
/// plugins, its input at the example's data and its output at `out`.
pub(crate) fn example_text(example: &Path, out: &Path) -> String {
    let examples = example.parent().expect("a directory");
    std::fs::read_to_string(example)
        .expect("the example")
        .replace(
            "\"../plugins/dist/",
            &format!("\"{}/", plugins_dir().display()),
        )
        .replace(
            "host = \"data\"",
            &format!("host = {:?}", examples.join("data").display().to_string()),
        )
        .replace(
            "host = \"out\"",
            &format!("host = {:?}", out.display().to_string()),
        )
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// An example config with its plugin paths pointed at the built plugins
/// and its directories at the example's, in `dir`.
fn example_in(example: &Path, dir: &Path) -> PathBuf {
    let text = example_text(example, dir);
    let path = dir.join(example.file_name().expect("a file"));
    std::fs::write(&path, text).expect("write the config");
    path
}

/// A run of `count` documents at `per_second` through a stage that stamps
/// `version` and one (`move`, the component at `dir/move.wasm`) that maps
/// `n` to `m`, into `dir/out/docs.jsonl`; `extra` is appended.
fn slow_run(dir: &Path, count: u64, per_second: u32, version: &str, extra: &str) -> String {
    with_plugins(&format!(
        r#"
        [publisher]
        max_docs_per_second = {per_second}
        [worker]
        threads = 1
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ count = {count} }} }}
        [[pipelines]]
        name = "p"
        [[pipelines.stages]]
        name = "version"
        plugin = {{ path = @set-static-values, config = {{ values = {{ version = "{version}" }} }} }}
        [[pipelines.stages]]
        name = "move"
        plugin = {{ path = {stage:?}, config = {{ mappings = [{{ source = "n", target = "m" }}] }} }}
        [indexer]
        plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/docs.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        {extra}
        "#,
        stage = dir.join("move.wasm").display().to_string(),
        out = dir.join("out").display().to_string(),
    ))
}

fn hang_up(process: &Proc) {
    let pid = process.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
}
