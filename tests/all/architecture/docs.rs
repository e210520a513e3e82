//! The pages that walk the code name files that exist: a file moved or
//! renamed without its page fails here, not in a reader's hands.

use std::path::Path;

use weir_tests::repo_root;

/// Every `` `a/b.rs` `` or `` `a/b/` `` a page names (a path with a folder
/// in it), as written.
fn named_paths(page: &str) -> Vec<&str> {
    page.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|quoted| quoted.split(['→', ',']).map(str::trim))
        .filter(|p| p.contains('/') && (p.ends_with(".rs") || p.ends_with('/')))
        .filter(|p| !p.contains(' ') && !p.starts_with("host/"))
        .collect()
}

/// The paths of `page` (below `docs/`) that are neither under `host/src`
/// nor under the repository's root.
fn missing(root: &Path, page: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("docs").join(page)).expect("read page");
    let src = root.join("host/src");
    named_paths(&text)
        .into_iter()
        .filter(|p| !src.join(p).exists() && !root.join(p).exists())
        .map(|p| format!("docs/{page}: `{p}`"))
        .collect()
}

#[test]
fn the_pages_that_walk_the_code_name_files_that_exist() {
    let root = repo_root();
    let gone: Vec<String> = ["document-way.md", "architecture.md"]
        .iter()
        .flat_map(|page| missing(root, page))
        .collect();
    assert!(
        gone.is_empty(),
        "named by the docs but not in the repository:\n{}",
        gone.join("\n")
    );
}

#[test]
fn paths_are_read_from_backticks() {
    let page =
        "| x | `run/a.rs` → `plugin/b.rs`, `core/` | `weir run --full` `c.rs` `host/src/lib.rs` |";
    assert_eq!(named_paths(page), ["run/a.rs", "plugin/b.rs", "core/"]);
}
