//! No file longer than a reader can hold: the host's sources, the
//! integration tests, the plugins' sources and the SDKs in every language.

use std::path::{Path, PathBuf};

use weir_tests::repo_root;

use super::{sources, write_tree};

/// Longest source file, in lines, unit tests included.
const MAX_FILE_LINES: usize = 600;

/// Files over [`MAX_FILE_LINES`] written before the rule covered tests and
/// plugins: each is to be split by topic (as `tests/all/extraction/`,
/// `changes/` and `accounting/` were), then taken off this list. A file not
/// listed may not grow past the bound, and a listed one that no longer
/// needs its place must leave the list.
const TO_BE_SPLIT: &[&str] = &[
    "tests/all/fleet.rs",
    "tests/all/kafka.rs",
    "tests/all/local_run.rs",
    "tests/all/operations.rs",
    "tests/all/sandbox.rs",
    "tests/all/web_sync.rs",
];

/// Every `.rs` file under `dir` whose path below it passes through a
/// folder named `src` (a plugin's sources, not its build output), and every
/// Python or JavaScript source (the SDKs and the plugins written with them).
fn plugin_sources(dir: &Path, in_src: bool, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read plugins") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "target" | "node_modules" | "dist" | "__pycache__")
                && !name.starts_with('.')
            {
                plugin_sources(&path, in_src || name == "src", out);
            }
        } else if (in_src && name.ends_with(".rs"))
            || [".py", ".js", ".mjs"].iter().any(|e| name.ends_with(e))
        {
            out.push(path);
        }
    }
}

/// The files over `max` lines of `files`, as paths below `root`, and the
/// entries of `allowed` that are not among them (split already, or gone).
fn over_the_bound(
    root: &Path,
    files: &[PathBuf],
    max: usize,
    allowed: &[&str],
) -> (Vec<String>, Vec<String>) {
    let mut long = Vec::new();
    let mut listed_and_long = Vec::new();
    for file in files {
        let lines = std::fs::read_to_string(file).expect("read").lines().count();
        if lines <= max {
            continue;
        }
        let relative = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        if allowed.contains(&relative.as_str()) {
            listed_and_long.push(relative);
        } else {
            long.push(format!("{relative} ({lines} lines)"));
        }
    }
    long.sort();
    let stale = allowed
        .iter()
        .filter(|a| !listed_and_long.iter().any(|l| l == *a))
        .map(|a| (*a).to_owned())
        .collect();
    (long, stale)
}

/// The files the rule covers: the host's sources, the integration tests
/// (`tests/all/**`) and the plugins' and SDKs' sources.
fn covered(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    sources(&root.join("host/src"), &mut files);
    sources(&root.join("tests/all"), &mut files);
    plugin_sources(&root.join("plugins"), false, &mut files);
    files
}

#[test]
fn no_source_file_is_longer_than_a_reader_can_hold() {
    let root = repo_root();
    let (long, stale) = over_the_bound(root, &covered(root), MAX_FILE_LINES, TO_BE_SPLIT);
    assert!(
        long.is_empty(),
        "split these files by job (at most {MAX_FILE_LINES} lines):\n{}",
        long.join("\n")
    );
    assert!(
        stale.is_empty(),
        "these are no longer over {MAX_FILE_LINES} lines (or gone): take them off TO_BE_SPLIT in tests/all/architecture.rs:\n{}",
        stale.join("\n")
    );
}

/// The rule sees long files in each tree it covers, lets a listed one be,
/// and names a listed one that is short now.
#[test]
fn the_length_rule_covers_tests_and_plugins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let long = "//\n".repeat(MAX_FILE_LINES + 1);
    write_tree(
        root,
        &[
            ("host/src/run/long.rs", long.as_str()),
            ("tests/all/topic/deep.rs", long.as_str()),
            ("tests/all/listed.rs", long.as_str()),
            ("tests/all/split_now.rs", "//\n"),
            ("plugins/stages/s/src/deep/long.rs", long.as_str()),
            ("plugins/stages/s/target/gen.rs", long.as_str()),
            ("plugins/stages/s/build.rs", long.as_str()),
            ("plugins/sdk-python/weir/_long.py", long.as_str()),
            ("plugins/sdk-js/src/long.js", long.as_str()),
            ("plugins/sdk-js/node_modules/dep/index.js", long.as_str()),
        ],
    );
    let files = covered(root);
    let (long, stale) = over_the_bound(
        root,
        &files,
        MAX_FILE_LINES,
        &["tests/all/listed.rs", "tests/all/split_now.rs"],
    );
    let names: Vec<&str> = long
        .iter()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        [
            "host/src/run/long.rs",
            "plugins/sdk-js/src/long.js",
            "plugins/sdk-python/weir/_long.py",
            "plugins/stages/s/src/deep/long.rs",
            "tests/all/topic/deep.rs"
        ],
        "{long:?}"
    );
    assert_eq!(stale, ["tests/all/split_now.rs"]);
}
