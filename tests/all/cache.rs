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

/// The compiled entries in `dir` (not its key).
fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn noop_processes(runtime: &PluginRuntime) -> weir::core::document::Document {
    let mut d = weir::core::document::Document::new("d");
    d.set("title", json!("kept")).expect("set");
    runtime
        .load_stage("noop", &spec("noop-stage", json!({})))
        .expect("load")
        .instantiate()
        .expect("instantiate")
        .process(&mut d)
        .expect("process");
    d
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
    // A rewritten entry is a new file (written aside, renamed into place).
    let inode = |path: &std::path::Path| {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).expect("meta"))
    };
    let written = inode(&files[0]);

    // A new runtime (a new process, in effect) loads the same entry.
    let stage = cached_runtime(cache.path())
        .load_stage("noop", &s)
        .expect("second load");
    stage
        .instantiate()
        .expect("instantiate")
        .process(&mut weir::core::document::Document::new("d"))
        .expect("process");
    assert_eq!(entries(cache.path()), files);
    assert_eq!(inode(&files[0]), written, "the entry was compiled again");

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
        .process(&mut weir::core::document::Document::new("d"))
        .expect("process");
    assert!(
        std::fs::read(&entry).expect("read").len() > 1000,
        "the entry was rewritten"
    );
}

#[test]
fn an_entry_swapped_for_other_native_code_is_recompiled_not_run() {
    let cache = tempfile::tempdir().expect("tempdir");
    let runtime = cached_runtime(cache.path());
    noop_processes(&runtime);
    let noop_entry = entries(cache.path()).remove(0);
    runtime
        .load_stage(
            "copy",
            &spec(
                "copy-fields",
                json!({ "mappings": [{ "source": "title", "target": "copy" }] }),
            ),
        )
        .expect("load");
    let copy_entry = entries(cache.path())
        .into_iter()
        .find(|e| *e != noop_entry)
        .expect("a second entry");
    // Another plugin's native code, signed by this very cache, under the
    // no-op stage's name: the digest covers the name, so it does not verify.
    std::fs::copy(&copy_entry, &noop_entry).expect("swap");
    let d = noop_processes(&cached_runtime(cache.path()));
    assert_eq!(d.get("copy"), None, "the swapped-in code never ran");
    assert_ne!(
        std::fs::read(&noop_entry).expect("read"),
        std::fs::read(&copy_entry).expect("read"),
        "the entry was recompiled"
    );

    // Code from another cache (another key) does not verify either.
    let other = tempfile::tempdir().expect("tempdir");
    noop_processes(&cached_runtime(other.path()));
    let foreign = entries(other.path()).remove(0);
    std::fs::copy(&foreign, &noop_entry).expect("copy in");
    noop_processes(&cached_runtime(cache.path()));
    assert_ne!(
        std::fs::read(&noop_entry).expect("read"),
        std::fs::read(&foreign).expect("read"),
        "the foreign entry was replaced"
    );
}

#[cfg(unix)]
#[test]
fn a_cache_directory_open_to_other_users_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    noop_processes(&cached_runtime(cache.path()));
    assert!(entries(cache.path()).is_empty(), "nothing cached there");

    // A key others can read is no secret: not used either.
    let cache = tempfile::tempdir().expect("tempdir");
    noop_processes(&cached_runtime(cache.path()));
    let key = cache.path().join("cache.key");
    assert_eq!(
        std::fs::metadata(&key).expect("key").permissions().mode() & 0o777,
        0o600
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let entry = entries(cache.path()).remove(0);
    std::fs::write(&entry, b"planted").expect("plant");
    noop_processes(&cached_runtime(cache.path()));
    assert_eq!(
        std::fs::read(&entry).expect("read"),
        b"planted",
        "the cache was not used at all"
    );
}

#[test]
fn a_key_cut_short_is_replaced() {
    let cache = tempfile::tempdir().expect("tempdir");
    let key = cache.path().join("cache.key");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&key).expect("create");
        file.write_all(b"short").expect("write");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    noop_processes(&cached_runtime(cache.path()));
    assert_eq!(std::fs::read(&key).expect("key").len(), 32, "a whole key");
    assert_eq!(entries(cache.path()).len(), 1, "and the cache is used");
}

/// The cache stays within its size: past it, the least recently used
/// entries go, never the one just written; a load marks its entry used.
#[test]
fn the_cache_keeps_the_recently_used_entries_within_its_size() {
    use std::time::{Duration, SystemTime};
    let cache = tempfile::tempdir().expect("tempdir");
    let bounded = |max_bytes| {
        PluginRuntime::new(RuntimeOptions {
            cache_dir: Some(cache.path().to_owned()),
            cache_max_bytes: max_bytes,
            ..RuntimeOptions::default()
        })
        .expect("runtime")
    };
    let load = |runtime: &PluginRuntime, crate_name: &str| {
        runtime
            .load_stage(crate_name, &spec(crate_name, json!({})))
            .expect("load");
        entries(cache.path())
    };
    let roomy = bounded(u64::MAX);
    let mut made = Vec::new();
    for name in ["noop-stage", "copy-fields", "trim-whitespace"] {
        let before = entries(cache.path());
        let after = load(&roomy, name);
        made.push(
            after
                .into_iter()
                .find(|p| !before.contains(p))
                .expect("a new entry"),
        );
    }
    // Last used 300, 200 and 100 seconds ago, in that order.
    for (entry, age) in made.iter().zip([300, 200, 100]) {
        std::fs::File::options()
            .append(true)
            .open(entry)
            .and_then(|f| f.set_modified(SystemTime::now() - Duration::from_secs(age)))
            .expect("set mtime");
    }
    // The oldest is used again: a new runtime loads it from disk.
    load(&bounded(u64::MAX), "noop-stage");
    // A new entry in a cache with room for it and about one more: the
    // least recently used (copy-fields, then trim-whitespace) go.
    let size = |path: &std::path::Path| std::fs::metadata(path).expect("meta").len();
    let room = made.iter().map(|p| size(p)).max().expect("entries") * 2 + 1;
    let before = entries(cache.path());
    let left = load(&bounded(room + size(&made[0])), "rename-fields");
    let newest = left
        .iter()
        .find(|p| !before.contains(p))
        .expect("the new entry");
    assert!(
        left.contains(&made[0]),
        "the entry used last was removed: {left:?}"
    );
    assert!(
        !left.contains(&made[1]),
        "the least recently used entry stayed: {left:?}"
    );
    assert!(left.contains(newest));
    // A cache of 0 bytes keeps only what was just written.
    let left = load(&bounded(0), "concatenate");
    assert_eq!(left.len(), 1, "{left:?}");
}
