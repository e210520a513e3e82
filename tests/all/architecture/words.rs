//! Words the library does not use: a run's status is a `RunState`, not a
//! string; `anyhow` is the binary's (`cli/`), the library's errors are typed;
//! a limit's key (`limits.max_depth`) is written by `core::limit::Limit`
//! alone, never typed into a message by hand.

use std::path::Path;

use weir_tests::repo_root;

use super::{module_of, sources, write_tree};

/// Each line of the library (not `cli/`) that `breaks` flags, as `file:line`
/// (with `tests`, unit tests left out: files named `tests.rs`, `*_tests.rs`
/// or under a `tests/` folder, and what follows a file's `#[cfg(test)]`).
fn lines_that(src: &Path, tests: bool, breaks: impl Fn(&str) -> bool) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut found = Vec::new();
    for file in files {
        if module_of(src, &file).is_none_or(|m| m == "cli") {
            continue;
        }
        let relative = file
            .strip_prefix(src)
            .unwrap_or(&file)
            .display()
            .to_string();
        let test_file = relative.ends_with("tests.rs")
            || relative.contains("tests/")
            || relative.contains("_props/");
        if !tests && test_file {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            if !tests && line.trim() == "#[cfg(test)]" {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            if breaks(code) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

fn is_string_status(code: &str) -> bool {
    let code: String = code.split_whitespace().collect();
    ["status:String", "status:Option<String>"]
        .iter()
        .any(|s| code.contains(s))
}

fn names_anyhow(code: &str) -> bool {
    code.contains("anyhow::") || code.contains("anyhow!")
}

/// A string literal on the line holds `limits.<key>`.
fn types_a_limit_key(code: &str) -> bool {
    code.split('"').skip(1).step_by(2).any(|literal| {
        literal.match_indices("limits.").any(|(at, _)| {
            literal[at + "limits.".len()..].starts_with(|c: char| c.is_ascii_lowercase())
        })
    })
}

#[test]
fn a_run_status_is_a_type_anyhow_stays_in_the_binary_and_limits_name_their_keys() {
    let src = repo_root().join("host/src");
    let strings = lines_that(&src, true, is_string_status);
    assert!(
        strings.is_empty(),
        "a status kept as text (use the state's enum):\n{}",
        strings.join("\n")
    );
    let anyhow = lines_that(&src, true, names_anyhow);
    assert!(
        anyhow.is_empty(),
        "anyhow outside cli/ (give the library a typed error):\n{}",
        anyhow.join("\n")
    );
    let by_hand: Vec<String> = lines_that(&src, false, types_a_limit_key)
        .into_iter()
        .filter(|l| !l.contains("core/limit.rs"))
        .collect();
    assert!(
        by_hand.is_empty(),
        "a limit's key typed by hand (name it with core::limit::Limit):\n{}",
        by_hand.join("\n")
    );
}

#[test]
fn the_word_checks_see_what_they_forbid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    write_tree(
        src,
        &[
            ("cli/mod.rs", "fn main() -> anyhow::Result<()> { Ok(()) }\n"),
            (
                "fleet/worker.rs",
                "fn f() -> anyhow::Result<()> {\n    anyhow::bail!(\"x\")\n}\n",
            ),
            (
                "control/store.rs",
                "// status: String in a comment\npub struct R {\n    pub status : String,\n}\n",
            ),
            (
                "run/limits.rs",
                "fn f() -> String {\n    format!(\"over {} (limits.max_depth)\", 3)\n}\n#[cfg(test)]\nmod tests {\n    const T: &str = \"(limits.max_depth)\";\n}\n",
            ),
            ("run/tests.rs", "const T: &str = \"limits.max_depth\";\n"),
            ("run/fine.rs", "const T: &str = \"limits = {}\";\n"),
        ],
    );
    let strings = lines_that(src, true, is_string_status);
    assert_eq!(strings.len(), 1, "{strings:?}");
    assert!(strings[0].contains("store.rs:3"), "{strings:?}");
    let anyhow = lines_that(src, true, names_anyhow);
    assert_eq!(anyhow.len(), 2, "{anyhow:?}");
    assert!(anyhow.iter().all(|l| l.contains("worker.rs")), "{anyhow:?}");
    let keys = lines_that(src, false, types_a_limit_key);
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].contains("limits.rs:2"), "{keys:?}");
}
