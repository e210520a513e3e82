//! Words the library does not use: a run's status is a `RunState`, not a
//! string; `anyhow` is the binary's (`cli/`), the library's errors are typed.

use std::path::Path;

use weir_tests::repo_root;

use super::{module_of, sources};

/// Each line of the library (not `cli/`) that `breaks` flags, as `file:line`.
fn lines_that(src: &Path, breaks: impl Fn(&str) -> bool) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut found = Vec::new();
    for file in files {
        if module_of(src, &file).is_none_or(|m| m == "cli") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read source");
        for (n, line) in text.lines().enumerate() {
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

#[test]
fn a_run_status_is_a_type_and_anyhow_stays_in_the_binary() {
    let src = repo_root().join("host/src");
    let strings = lines_that(&src, is_string_status);
    assert!(
        strings.is_empty(),
        "a status kept as text (use the state's enum):\n{}",
        strings.join("\n")
    );
    let anyhow = lines_that(&src, names_anyhow);
    assert!(
        anyhow.is_empty(),
        "anyhow outside cli/ (give the library a typed error):\n{}",
        anyhow.join("\n")
    );
}

#[test]
fn the_word_checks_see_what_they_forbid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    for (path, text) in [
        ("cli/mod.rs", "fn main() -> anyhow::Result<()> { Ok(()) }\n"),
        (
            "fleet/worker.rs",
            "fn f() -> anyhow::Result<()> {\n    anyhow::bail!(\"x\")\n}\n",
        ),
        (
            "control/store.rs",
            "// status: String in a comment\npub struct R {\n    pub status : String,\n}\n",
        ),
    ] {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let strings = lines_that(src, is_string_status);
    assert_eq!(strings.len(), 1, "{strings:?}");
    assert!(strings[0].contains("store.rs:3"), "{strings:?}");
    let anyhow = lines_that(src, names_anyhow);
    assert_eq!(anyhow.len(), 2, "{anyhow:?}");
    assert!(anyhow.iter().all(|l| l.contains("worker.rs")), "{anyhow:?}");
}
