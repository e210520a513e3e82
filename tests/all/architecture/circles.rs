//! No circle of imports between files: what a file names (`crate::`,
//! `super::`, `self::` paths, in `use` lines and inline) is resolved to the
//! file that defines the named module, and those arrows may not loop.
//!
//! A module's `mod.rs` and the files below its folder are one unit to the
//! rest of the crate: their arrows to each other (a child using its parent's
//! types, a parent re-exporting a child) are not counted, and an arrow from
//! outside into any of them is an arrow to the unit. So the rule holds in
//! every folder between its files and sub-folders: two that need each other
//! share a third below both.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use weir_tests::repo_root;

use super::{sources, write_tree};

/// A module's path from the crate root (`["run", "state"]`).
type ModPath = Vec<String>;

/// The module `file` (below `src`) defines.
fn module_path(src: &Path, file: &Path) -> ModPath {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: ModPath = relative
        .with_extension("")
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_owned))
        .collect();
    if parts
        .last()
        .is_some_and(|l| matches!(l.as_str(), "mod" | "lib" | "main"))
    {
        parts.pop();
    }
    parts
}

/// `text` without `//` comments (a `//` inside a string is rare enough in
/// module paths to ignore).
fn code_of(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or("").to_owned())
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a use tree starting at `text` names, each as its segments:
/// `a::b::{c, d::e}` gives `a::b::c` and `a::b::d::e`.
fn use_tree(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut rest = text.trim_start();
    loop {
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end > 0 {
            path.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
        if let Some(after) = rest.strip_prefix("::") {
            rest = after.trim_start();
            if let Some(group) = rest.strip_prefix('{') {
                for item in top_level_items(group) {
                    use_tree(item, &path, out);
                }
                return;
            }
            continue;
        }
        out.push(path);
        return;
    }
}

/// The comma-separated items of a `{...}` group whose text starts after
/// the `{`, up to its matching `}`.
fn top_level_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.retain(|i| !i.trim().is_empty());
    items
}

/// Every module path `lines` (the code of the file defining `module`)
/// names, with the line it is named on. Lines after an inline `mod x {`
/// (a file's tests) are one module deeper.
fn named_paths(module: &[String], lines: &[String]) -> Vec<(ModPath, usize)> {
    let mut found = Vec::new();
    let mut depth = 0;
    let text: String = lines.join("\n");
    let line_at = |offset: usize| text[..offset].matches('\n').count() + 1;
    let starts: Vec<usize> = lines
        .iter()
        .scan(0, |at, l| {
            let start = *at;
            *at += l.len() + 1;
            Some(start)
        })
        .collect();
    let inline_from = lines
        .iter()
        .position(|l| {
            let t = l.trim();
            t.starts_with("mod ") && t.ends_with('{')
                || t.starts_with("pub mod ") && t.ends_with('{')
        })
        .map_or(usize::MAX, |n| starts[n]);
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(root).map(|a| a + from) {
            from = at + root.len();
            if text[..at].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            if at >= inline_from {
                depth = 1;
            }
            let mut paths = Vec::new();
            use_tree(&text[at..], &[], &mut paths);
            for path in paths {
                if let Some(absolute) = absolute(module, depth, &path) {
                    found.push((absolute, line_at(at)));
                }
            }
        }
        depth = 0;
    }
    found
}

/// `path` (starting `crate`, `super` or `self`) from inside `module`,
/// `depth` inline modules down, as a path from the crate root.
fn absolute(module: &[String], depth: usize, path: &[String]) -> Option<ModPath> {
    let mut segments = path.iter();
    let mut base: ModPath = match segments.next()?.as_str() {
        "crate" => Vec::new(),
        _ => {
            let mut base = module.to_vec();
            base.extend(std::iter::repeat_n(String::new(), depth));
            if path[0] == "super" {
                base.pop()?;
            }
            base
        }
    };
    for segment in segments {
        match segment.as_str() {
            "super" => {
                base.pop()?;
            }
            "self" => {}
            name => base.push(name.to_owned()),
        }
    }
    base.retain(|s| !s.is_empty());
    Some(base)
}

/// Each unit's arrows to its siblings: `unit -> (unit -> first file:line)`.
type Graph = BTreeMap<ModPath, BTreeMap<ModPath, String>>;

/// Where an arrow from `from` to `to` falls: the two sibling units below
/// their deepest common folder (`None` when one holds the other).
fn siblings(from: &[String], to: &[String]) -> Option<(ModPath, ModPath)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..=common].to_vec(), to[..=common].to_vec()))
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    sources(src, &mut files);
    let names: BTreeMap<ModPath, String> = files
        .iter()
        .map(|f| {
            let name = f
                .strip_prefix(src)
                .expect("under src")
                .display()
                .to_string();
            (module_path(src, f), name)
        })
        .collect();
    let mut graph = Graph::new();
    for file in &files {
        let module = module_path(src, file);
        let code = code_of(&std::fs::read_to_string(file).expect("read source"));
        for (path, line) in named_paths(&module, &code) {
            // The file defining the longest prefix of the path.
            let Some(target) = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| names.contains_key(p))
            else {
                continue;
            };
            if let Some((from, to)) = siblings(&module, &target) {
                graph
                    .entry(from)
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("{}:{line}", names[&module]));
            }
        }
    }
    graph
}

/// The circles of `graph` (strongly connected parts of more than one
/// unit), each with the arrows inside it.
fn circles(graph: &Graph) -> Vec<Vec<(ModPath, ModPath, String)>> {
    // Which files each file reaches.
    let reach = |from: &ModPath| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(at) = todo.pop() {
            for next in graph.get(&at).into_iter().flat_map(|a| a.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&ModPath, BTreeSet<ModPath>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for (module, reached) in &reaches {
        if done.contains(*module) || !reached.contains(*module) {
            continue;
        }
        let part: BTreeSet<&ModPath> = reached
            .iter()
            .filter(|other| reaches.get(other).is_some_and(|r| r.contains(*module)))
            .collect();
        let arrows = part
            .iter()
            .flat_map(|from| {
                graph[*from]
                    .iter()
                    .filter(|(to, _)| part.contains(to))
                    .map(|(to, at)| ((*from).clone(), to.clone(), at.clone()))
            })
            .collect();
        done.extend(part.into_iter().cloned());
        found.push(arrows);
    }
    found
}

fn describe(src: &Path) -> Vec<String> {
    circles(&graph(src))
        .into_iter()
        .map(|arrows| {
            arrows
                .iter()
                .map(|(from, to, at)| format!("  {} -> {} ({at})", from.join("/"), to.join("/")))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[test]
fn no_circle_of_imports_between_files() {
    let circles = describe(&repo_root().join("host/src"));
    assert!(
        circles.is_empty(),
        "files that import each other, round a circle (move what both need into a file below both):\n{}",
        circles.join("\n\n")
    );
}

#[test]
fn the_check_sees_a_circle_and_lets_a_module_and_its_children_be() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    write_tree(
        src,
        &[
            ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
            (
                "a/mod.rs",
                "mod inner;\nuse self::inner::X;\nuse crate::b::Y;\n",
            ),
            ("a/inner.rs", "use super::Z;\n"),
            ("b.rs", "pub fn f() {\n    crate::c::g();\n}\n"),
            (
                "c.rs",
                "use crate::{\n    a::inner::{X, W},\n};\n#[cfg(test)]\nmod tests {\n    use super::super::b::Y;\n}\n",
            ),
        ],
    );
    let circles = describe(src);
    assert_eq!(circles.len(), 1, "{circles:#?}");
    let circle = &circles[0];
    for arrow in [
        "a -> b (a/mod.rs:3)",
        "b -> c (b.rs:2)",
        "c -> a (c.rs:1)",
        "c -> b (c.rs:6)",
    ] {
        assert!(circle.contains(arrow), "{arrow} missing: {circle}");
    }
    assert!(
        !circle.contains("inner.rs"),
        "a child and its parent are one unit: {circle}"
    );
}
