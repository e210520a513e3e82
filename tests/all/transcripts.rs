//! Every bundled plugin's `weir test` transcript, run by the `weir` binary.
//!
//! A plugin's `test/` folder holds `config.toml`, `input.jsonl` (not for a
//! connector) and `expected.jsonl`: the plugin, given that config, must turn
//! that input into exactly that output, in batches of the default size and
//! one document at a time. Files it reads or writes are in `test/files/`,
//! copied for each run to a fresh folder granted as `/data`. The configs are
//! also the examples of docs/plugin-reference.md.

use std::path::Path;
use std::process::Command;

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// Bundled plugins with no transcript, and why; each is tested against its
/// real server elsewhere.
const NO_TRANSCRIPT: [(&str, &str); 12] = [
    (
        "kafka-connector",
        "needs a Kafka topic: tests/all/kafka_source/",
    ),
    (
        "queue-connector",
        "needs a RabbitMQ queue: tests/all/queue_source/",
    ),
    (
        "embed-text",
        "needs an embedding server: tests/all/embeddings.rs",
    ),
    (
        "feed-connector",
        "needs a web server: tests/all/web_sync.rs",
    ),
    (
        "opensearch-connector",
        "needs OpenSearch: tests/all/search.rs",
    ),
    (
        "opensearch-indexer",
        "needs OpenSearch: tests/all/search.rs",
    ),
    (
        "s3-connector",
        "needs an S3-compatible server: tests/all/s3.rs",
    ),
    ("solr-connector", "needs Solr: tests/all/solr_sync.rs"),
    ("sql-connector", "needs PostgreSQL: tests/all/sql.rs"),
    ("solr-indexer", "needs Solr: tests/all/search.rs"),
    (
        "timestamp",
        "writes the current time: tests/all/field_stages.rs checks it against the clock",
    ),
    ("web-connector", "needs a web server: tests/all/web_sync.rs"),
];

#[test]
fn every_bundled_plugin_gives_its_transcript() {
    let plugins = weir_tests::repo_root().join("plugins");
    let mut failures = Vec::new();
    let mut ran = 0;
    for kind in ["stages", "connectors", "indexers"] {
        let mut dirs: Vec<_> = std::fs::read_dir(plugins.join(kind))
            .expect("plugin folders")
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|dir| dir.join("Cargo.toml").is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            let name = dir.file_name().and_then(|n| n.to_str()).expect("a name");
            let test = dir.join("test");
            if NO_TRANSCRIPT.iter().any(|(n, _)| *n == name) {
                continue;
            }
            if !test.join("config.toml").is_file() || !test.join("expected.jsonl").is_file() {
                failures.push(format!(
                    "plugins/{kind}/{name} has no transcript (test/config.toml, test/expected.jsonl)"
                ));
                continue;
            }
            for batch in ["100", "1"] {
                if let Err(e) = transcript(name, &test, batch) {
                    failures.push(format!("{name} (batches of {batch}): {e}"));
                }
            }
            ran += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 35, "only {ran} transcripts ran");
}

/// Run `name`'s transcript in `test` with `--batch-size batch`.
fn transcript(name: &str, test: &Path, batch: &str) -> Result<(), String> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut command = Command::new(WEIR);
    command
        .arg("test")
        .arg(weir_tests::plugin(name))
        .arg("--config")
        .arg(test.join("config.toml"))
        .arg("--expect")
        .arg(test.join("expected.jsonl"))
        .args(["--batch-size", batch]);
    if test.join("input.jsonl").is_file() {
        command.arg("--input").arg(test.join("input.jsonl"));
    }
    if test.join("files").is_dir() {
        copy_dir(&test.join("files"), data.path())?;
        command
            .arg("--dir")
            .arg(format!("{}:/data:rw", data.path().display()));
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run weir: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    for entry in std::fs::read_dir(from).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// docs/plugin-reference.md is what `plugins/reference` makes from the
/// plugins' `src/config.rs` now: a setting added or documented anew without
/// the reference made again fails here.
#[test]
fn the_plugin_reference_is_made_from_the_plugins_config_types() {
    let root = weir_tests::repo_root();
    let target = std::env::var_os("WEIR_PLUGIN_TARGET_DIR")
        .map_or_else(|| root.join("plugins").join("target"), Into::into);
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "run",
            "--quiet",
            "--locked",
            "-p",
            "plugin-reference",
            "--manifest-path",
        ])
        .arg(root.join("plugins").join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target)
        .arg("--")
        .arg("--check")
        .arg(root.join("docs").join("plugin-reference.md"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
