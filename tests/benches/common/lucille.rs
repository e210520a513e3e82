//! Lucille (github.com/kmwtechnology/lucille) on the local benchmark's
//! workload, when a built one is at hand: its own file connector reading the
//! same JSONL, TrimWhitespace, CopyFields and SplitFieldValues, and its CSV
//! indexer, in local mode (one JVM), with the same worker threads and batch
//! size as Weir.
//!
//! `WEIR_BENCH_LUCILLE` names a built `lucille-core/target` directory (the
//! one `mvn package` leaves, holding `lucille.jar` and `lib/`);
//! `WEIR_BENCH_JAVA` the `java` to run it with (Java 21 or later; default:
//! `java` on the path).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a built Lucille is, from `WEIR_BENCH_LUCILLE`; `None` when unset.
/// Panics when it is set to something that is not a built Lucille.
pub fn from_env() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("WEIR_BENCH_LUCILLE")?);
    assert!(
        dir.join("lucille.jar").is_file() && dir.join("lib").is_dir(),
        "WEIR_BENCH_LUCILLE={} does not hold lucille.jar and lib/: point it at lucille-core/target after `mvn package`",
        dir.display()
    );
    Some(dir)
}

/// The Lucille run of `input` into `output` (CSV with `columns`), its
/// config written into `dir`, which is also its working directory (its
/// logs go there).
pub fn command(
    lucille: &Path,
    dir: &Path,
    input: &Path,
    output: &Path,
    columns: &[&str],
    threads: usize,
    batch: usize,
) -> Command {
    let quoted = |s: &str| serde_json::to_string(s).expect("a string");
    let columns: Vec<String> = columns.iter().map(|c| quoted(c)).collect();
    let config = format!(
        r#"
connectors: [{{
  name: "bench", class: "com.kmwllc.lucille.connector.FileConnector", pipeline: "p",
  paths: [{input}], fileHandlers: {{ jsonl: {{}} }}
}}]
pipelines: [{{
  name: "p",
  stages: [
    {{ name: "trim", class: "com.kmwllc.lucille.stage.TrimWhitespace", fields: ["title"] }},
    {{ name: "copy", class: "com.kmwllc.lucille.stage.CopyFields", fieldMapping: {{ title: "title_copy" }} }},
    {{ name: "split", class: "com.kmwllc.lucille.stage.SplitFieldValues", inputField: "tags",
       outputField: "tags", delimiter: ";", trimWhitespace: true }}
  ]
}}]
indexer {{ type: "CSV", class: "com.kmwllc.lucille.indexer.CSVIndexer", batchSize: {batch} }}
csv {{ path: {output}, columns: [{columns}] }}
worker {{ threads: {threads} }}
"#,
        input = quoted(&input.display().to_string()),
        output = quoted(&output.display().to_string()),
        columns = columns.join(", "),
    );
    let file = dir.join("lucille.conf");
    std::fs::write(&file, config).expect("write the Lucille config");
    let java = std::env::var_os("WEIR_BENCH_JAVA").unwrap_or_else(|| "java".into());
    let mut command = Command::new(java);
    command
        .current_dir(dir)
        .arg(format!("-Dconfig.file={}", file.display()))
        .arg("-cp")
        .arg(format!(
            "{}:{}/*",
            lucille.join("lucille.jar").display(),
            lucille.join("lib").display()
        ))
        .arg("com.kmwllc.lucille.core.Runner");
    command
}

/// Rows in the CSV file at `path`, header aside (Lucille quotes every
/// field, and none of the benchmark's values holds a line break).
pub fn rows(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).expect("read Lucille's CSV");
    text.lines().count().saturating_sub(1)
}
