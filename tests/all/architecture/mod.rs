//! The host's layering, read from its source: dependencies point one way.
//!
//! `core` (documents, events, failures, limits, problems) names no other
//! module; each layer above may use only the layers below it; the library
//! never reaches into the binary's `cli`. A file that breaks a rule is named
//! with the line that does, so a reviewer sees the arrow, not a count.

use std::path::{Path, PathBuf};

use weir_tests::repo_root;

/// The library's top-level modules, lowest layer first: a module may name
/// its own layer and those before it, never one after it.
const LAYERS: &[&[&str]] = &[
    &["core"],
    &["http", "telemetry"],
    &["plugin"],
    &["config"],
    &["messenger"],
    &["run", "testing"],
    &["topology"],
    &["control"],
    &["fleet"],
];

/// Longest source file, in lines, unit tests included.
const MAX_FILE_LINES: usize = 600;

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read host/src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src` belongs to (`None` for lib.rs
/// and main.rs).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

/// Every `crate::<module>` a line of code names (comments left out).
fn named_modules(line: &str) -> Vec<&str> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        // `crate::{a, b}` names several.
        if end == 0 && after.starts_with('{') {
            let list = &after[1..after.find('}').unwrap_or(after.len())];
            found.extend(
                list.split(',')
                    .map(|m| m.trim().split("::").next().unwrap_or("").trim()),
            );
        } else {
            found.push(&after[..end]);
        }
        rest = &after[end..];
    }
    found.retain(|m| !m.is_empty());
    found
}

/// Each arrow that runs the wrong way: `file:line: module -> module`.
fn wrong_way_imports(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let Some(module) = module_of(src, &file) else {
            continue;
        };
        if module == "cli" {
            continue; // the binary's code: it may use the whole library
        }
        let Some(layer) = layer_of(&module) else {
            wrong.push(format!(
                "{}: module `{module}` has no layer in tests/all/architecture.rs",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            for named in named_modules(line) {
                let allowed = if module == "core" {
                    named == "core" // not even a crate-root item
                } else {
                    named == module
                        || layer_of(named).is_some_and(|l| l <= layer)
                        || layer_of(named).is_none() && named != "cli" // a crate-root item
                };
                if !allowed {
                    wrong.push(format!(
                        "{}:{}: {module} -> {named}: {}",
                        file.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    wrong
}

#[test]
fn dependencies_point_one_way() {
    let src = repo_root().join("host/src");
    let wrong = wrong_way_imports(&src);
    assert!(
        wrong.is_empty(),
        "imports against the layering (lowest first: {LAYERS:?}):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_a_wrong_arrow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("core")).expect("mkdir");
    std::fs::create_dir_all(src.join("telemetry")).expect("mkdir");
    std::fs::write(src.join("core/mod.rs"), "use crate::run::RunStatus;\n").expect("write");
    std::fs::write(
        src.join("telemetry/mod.rs"),
        "// crate::plugin in a comment is no import\nuse crate::{core::text, plugin::TrapCause};\n",
    )
    .expect("write");
    let wrong = wrong_way_imports(src);
    assert_eq!(wrong.len(), 2, "{wrong:#?}");
    assert!(
        wrong[0].contains("core -> run") || wrong[1].contains("core -> run"),
        "{wrong:#?}"
    );
    assert!(
        wrong
            .iter()
            .any(|w| w.contains("telemetry -> plugin") && w.contains(":2:")),
        "{wrong:#?}"
    );
}

/// Files over [`MAX_FILE_LINES`] written before the rule covered tests and
/// plugins: each is to be split by topic (as `tests/all/extraction/`,
/// `changes/` and `accounting/` were), then taken off this list. A file not
/// listed may not grow past the bound, and a listed one that no longer
/// needs its place must leave the list.
const TO_BE_SPLIT: &[&str] = &[
    "plugins/sdk/src/lib.rs",
    "tests/all/fleet.rs",
    "tests/all/kafka.rs",
    "tests/all/local_run.rs",
    "tests/all/operations.rs",
    "tests/all/sandbox.rs",
    "tests/all/web_sync.rs",
];

/// Every `.rs` file under `dir` whose path below it passes through a
/// folder named `src` (a plugin's sources, not its build output).
fn plugin_sources(dir: &Path, in_src: bool, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read plugins") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "target" | "node_modules" | "dist") && !name.starts_with('.') {
                plugin_sources(&path, in_src || name == "src", out);
            }
        } else if in_src && name.ends_with(".rs") {
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
/// (`tests/all/**`) and the plugins' sources (`plugins/**/src/**`).
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
    for (path, text) in [
        ("host/src/run/long.rs", long.as_str()),
        ("tests/all/topic/deep.rs", long.as_str()),
        ("tests/all/listed.rs", long.as_str()),
        ("tests/all/split_now.rs", "//\n"),
        ("plugins/stages/s/src/deep/long.rs", long.as_str()),
        ("plugins/stages/s/target/gen.rs", long.as_str()),
        ("plugins/stages/s/build.rs", long.as_str()),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
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
            "plugins/stages/s/src/deep/long.rs",
            "tests/all/topic/deep.rs"
        ],
        "{long:?}"
    );
    assert_eq!(stale, ["tests/all/split_now.rs"]);
}
