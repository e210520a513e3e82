//! `weir new`, as a plugin author uses it: for every kind and language, the
//! generated project builds with its one command and passes `weir test` as
//! generated (`./build.sh test`); a stage's pipeline cases pass too.

use std::path::Path;
use std::process::Command;

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// `weir new <kind> --lang <lang>`, then `./build.sh test` in the project.
fn round_trip(kind: &str, lang: &str) {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join(format!("{kind}-{lang}"));
    let created = Command::new(WEIR)
        .args(["new", kind, "demo-plugin", "--lang", lang, "--dir"])
        .arg(&dir)
        .output()
        .expect("weir new");
    assert!(
        created.status.success(),
        "weir new {kind} --lang {lang}: {}",
        String::from_utf8_lossy(&created.stderr)
    );
    let mut build = Command::new("bash");
    build.arg(dir.join("build.sh")).arg("test");
    if lang == "rust" {
        // The plugins' target dir: their dependencies are already built there.
        build.env("CARGO_TARGET_DIR", plugin_target_dir());
        // No `weir` given and none on PATH: the project finds the one that
        // made it, as a newcomer's does before installing it.
        build.env_remove("WEIR").env("PATH", path_without_weir());
    } else {
        build.env("WEIR", WEIR);
    }
    let built = build.output().expect("build.sh");
    assert!(
        built.status.success(),
        "{kind} in {lang}: ./build.sh test failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    assert!(
        String::from_utf8_lossy(&built.stderr).contains("output matches"),
        "{kind} in {lang}: weir test did not compare: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    if kind == "stage" {
        // The stage in a pipeline, through the cases beside it.
        assert!(
            String::from_utf8_lossy(&built.stdout).contains("2 of 2 cases passed"),
            "{kind} in {lang}: the pipeline cases did not pass: {}",
            String::from_utf8_lossy(&built.stdout)
        );
    }
    assert!(dir.join("demo-plugin.wasm").exists());
}

/// PATH without the directories that hold a `weir`.
fn path_without_weir() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<_> = std::env::split_paths(&path)
        .filter(|dir| !dir.join("weir").exists())
        .collect();
    std::env::join_paths(kept).expect("a PATH")
}

fn plugin_target_dir() -> std::path::PathBuf {
    std::env::var_os("WEIR_PLUGIN_TARGET_DIR").map_or_else(
        || weir_tests::repo_root().join("plugins").join("target"),
        Into::into,
    )
}

#[test]
fn new_rust_projects_build_and_pass_weir_test() {
    weir_tests::plugins_dir(); // the shared target dir holds the dependencies
    for kind in ["stage", "connector", "indexer"] {
        round_trip(kind, "rust");
    }
}

#[test]
fn new_python_projects_build_and_pass_weir_test() {
    for kind in ["stage", "connector", "indexer"] {
        round_trip(kind, "python");
    }
}

#[test]
fn new_js_projects_build_and_pass_weir_test() {
    for kind in ["stage", "connector", "indexer"] {
        round_trip(kind, "js");
    }
}

#[test]
fn weir_new_refuses_a_bad_name_and_a_used_directory() {
    let parent = tempfile::tempdir().expect("tempdir");
    let bad = Command::new(WEIR)
        .args(["new", "stage", "Bad_Name", "--dir"])
        .arg(parent.path().join("x"))
        .output()
        .expect("weir new");
    assert_eq!(bad.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a plugin name"));
    std::fs::write(parent.path().join("taken"), "x").expect("write");
    let used = Command::new(WEIR)
        .args(["new", "stage", "ok-name", "--dir"])
        .arg(parent.path())
        .output()
        .expect("weir new");
    assert_eq!(used.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&used.stderr).contains("not empty"));
    assert!(!Path::new(&parent.path().join("ok-name")).exists());
}
