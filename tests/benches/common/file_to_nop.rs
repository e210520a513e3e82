//! The pipeline the per-stage benchmarks time: the file connector reading
//! one JSON-lines file of `dir` (granted as `/work`) -> the given stages ->
//! the nop indexer, 2 worker threads, components cached under `dir`.

use std::path::Path;

/// The run config; `stages` is a pipeline's `stages = [...]` line, or empty
/// for the baseline without a stage.
pub fn run_config(dir: &Path, dist: &Path, input: &str, batch_size: usize, stages: &str) -> String {
    let plugin = |name: &str| format!("{:?}", dist.join(name).display().to_string());
    format!(
        r#"
        [runner]
        cache_dir = {cache:?}
        [worker]
        threads = 2
        [indexer]
        batch_size = {batch_size}
        plugin = {{ path = {nop} }}
        [[connectors]]
        name = "bench"
        pipeline = "p"
        plugin = {{ path = {files}, config = {{ paths = ["/work/{input}"] }}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/work" }}] }} }}
        [[pipelines]]
        name = "p"
        {stages}
        "#,
        cache = dir.join("cache").display().to_string(),
        dir = dir.display().to_string(),
        nop = plugin("nop_indexer.wasm"),
        files = plugin("file_connector.wasm"),
    )
}
