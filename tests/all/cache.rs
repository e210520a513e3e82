//! The on-disk cache of compiled components.

use serde_json::json;
use weir::plugin::{PluginRuntime, RuntimeOptions};
use weir_tests::spec;

fn cached_runtime(dir: &std::path::Path) -> PluginRuntime {
    PluginRuntime::new(RuntimeOptions {
        cache_dir: Some(dir.to_owned()),
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.expect("entry").path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn a_component_is_compiled_once_and_reused_from_disk() {
    let cache = tempfile::tempdir().expect("tempdir");
    let s = spec("noop-stage", json!({}));
    cached_runtime(cache.path())
        .load_stage("noop", &s)
        .expect("first load");
    let files = entries(cache.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "cwasm"));
    let modified = std::fs::metadata(&files[0])
        .expect("meta")
        .modified()
        .expect("mtime");

    // A new runtime (a new process, in effect) loads the same entry.
    let stage = cached_runtime(cache.path())
        .load_stage("noop", &s)
        .expect("second load");
    stage
        .instantiate()
        .expect("instantiate")
        .process(&mut weir::document::Document::new("d"))
        .expect("process");
    assert_eq!(entries(cache.path()), files);
    assert_eq!(
        std::fs::metadata(&files[0])
            .expect("meta")
            .modified()
            .expect("mtime"),
        modified
    );

    // A different component gets its own entry.
    cached_runtime(cache.path())
        .load_stage("copy", &spec("copy-fields", json!({})))
        .expect("load");
    assert_eq!(entries(cache.path()).len(), 2);
}

#[test]
fn a_corrupt_cache_entry_is_replaced() {
    let cache = tempfile::tempdir().expect("tempdir");
    let s = spec("noop-stage", json!({}));
    cached_runtime(cache.path())
        .load_stage("noop", &s)
        .expect("first load");
    let entry = entries(cache.path()).remove(0);
    std::fs::write(&entry, b"garbage").expect("corrupt");
    let stage = cached_runtime(cache.path())
        .load_stage("noop", &s)
        .expect("reload");
    stage
        .instantiate()
        .expect("instantiate")
        .process(&mut weir::document::Document::new("d"))
        .expect("process");
    assert!(
        std::fs::read(&entry).expect("read").len() > 1000,
        "the entry was rewritten"
    );
}
