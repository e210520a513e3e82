//! The host's layering, read from its source: dependencies point one way.
//!
//! `core` (documents, events, failures, limits, problems) names no other
//! module; each layer above may use only the layers below it; the library
//! never reaches into the binary's `cli`. A file that breaks a rule is named
//! with the line that does, so a reviewer sees the arrow, not a count.
//! Beside it: no circle of imports between files ([`circles`]), no file
//! longer than a reader can hold ([`length`]), and the words the library
//! does not use ([`words`]).

mod circles;
mod docs;
mod length;
mod words;

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
    &["source"],
    &["run"],
    &["testing"],
    &["topology"],
    &["tenancy"],
    &["control"],
    &["fleet"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

pub(super) fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read host/src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Writes each `(path, text)` below `root`: a tree for a rule's own test.
pub(super) fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

/// The top-level module a file under `src` belongs to (`None` for lib.rs
/// and main.rs).
pub(super) fn module_of(src: &Path, file: &Path) -> Option<String> {
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
    write_tree(
        src,
        &[
            ("core/mod.rs", "use crate::run::RunStatus;\n"),
            (
                "telemetry/mod.rs",
                "// crate::plugin in a comment is no import\nuse crate::{core::text, plugin::TrapCause};\n",
            ),
        ],
    );
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
