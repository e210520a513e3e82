//! Folder sync through the `weir` binary: `file-connector` pointed at a
//! folder walks it, sends each file once, then only what was added,
//! edited or touched with new bytes, deletes what is gone, keeps to its
//! globs, follows links only inside the folder, and survives files that
//! vanish or cannot be read mid-run and `kill -9` at any point (kill.rs,
//! midrun.rs).

mod kill;
mod midrun;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::sync::Sync;

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// The file connector walking `data/` (as `/data`) with `settings` (TOML
/// key-values, after the path), content as text.
fn folder(settings: &str) -> String {
    format!(
        r#"{{ path = @file-connector, config = {{ paths = ["/data"], content = "text"{settings} }}, grants = {{ dirs = [{{ host = "data", guest = "/data" }}] }} }}"#
    )
}

/// `weir run` of `sync`'s config to its end: its exit code and its log.
fn run_logged(sync: &Sync, extra: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(WEIR)
        .arg("run")
        .arg("--no-progress")
        .args(extra)
        .arg(sync.path("run.toml"))
        .output()
        .expect("weir starts");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    print!("{log}");
    (output.status.code().unwrap_or(-1), log)
}

/// Write `text` to `data/<rel>`, making its folders.
fn put(sync: &Sync, rel: &str, text: &str) {
    let path = sync.path("data").join(rel);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
    std::fs::write(path, text).expect("write");
}

/// The index the indexer's lines make, replayed in order: id -> content
/// (a deletion marker removes its id).
fn index_of(lines: &[Value]) -> BTreeMap<String, String> {
    let mut index = BTreeMap::new();
    for line in lines {
        let id = line["id"].as_str().unwrap_or_default().to_owned();
        if line["_deleted"] == Value::Bool(true) {
            index.remove(&id);
        } else if line.get("_weir_sweep").is_none() {
            let content = line["content"].as_str().unwrap_or_default().to_owned();
            index.insert(id, content);
        }
    }
    index
}

/// Every regular file under `dir` (names not starting with `.`): its path
/// relative to `dir` -> its text.
fn folder_of(dir: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("list").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().expect("type");
            let entry_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if name.starts_with('.') {
                continue;
            }
            if kind.is_dir() {
                walk(&entry.path(), &entry_rel, out);
            } else if kind.is_file() {
                let text = std::fs::read_to_string(entry.path()).expect("read");
                out.insert(entry_rel, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out);
    out
}

/// The ids of `lines` that are documents (not deletes), in order.
fn sent(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["_deleted"] != Value::Bool(true) && l.get("_weir_sweep").is_none())
        .map(|l| l["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The ids of `lines` that are deletion markers.
fn deleted(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["_deleted"] == Value::Bool(true))
        .map(|l| l["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Set the modified time of `data/<rel>` to `time`.
fn set_modified(sync: &Sync, rel: &str, time: std::time::SystemTime) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(sync.path("data").join(rel))
        .expect("open")
        .set_modified(time)
        .expect("set time");
}

fn modified(sync: &Sync, rel: &str) -> std::time::SystemTime {
    std::fs::metadata(sync.path("data").join(rel))
        .expect("stat")
        .modified()
        .expect("mtime")
}

#[test]
fn a_folder_syncs_then_only_what_changed_is_sent_and_what_is_gone_deleted() {
    let sync = Sync::new(&folder(""), "");
    for i in 0..20 {
        put(&sync, &format!("notes/n{i:02}.md"), &format!("note {i}"));
    }
    put(&sync, "a.txt", "alpha");
    put(&sync, "deep/er/still/b.html", "<p>beta</p>");
    assert_eq!(run_logged(&sync, &[]).0, 0);
    let first = sync.indexed();
    assert_eq!(first.len(), 22, "the first sync sends every file");
    assert_eq!(index_of(&first), folder_of(&sync.path("data")));
    let a = first.iter().find(|l| l["id"] == "a.txt").expect("a.txt");
    assert_eq!(a["path"], "/data/a.txt");
    assert_eq!(a["size"], 5);
    assert_eq!(a["content_type"], "text/plain");
    let when = a["modified"].as_str().expect("modified");
    assert!(
        when.len() == 24 && when.ends_with('Z') && when.as_bytes()[10] == b'T',
        "RFC 3339: {when}"
    );

    // Edited in place (same size), added, deleted, touched (new time,
    // same bytes), and one edited keeping its size and time.
    put(&sync, "notes/n03.md", "NOTE 3");
    put(&sync, "notes/new.md", "new note");
    std::fs::remove_file(sync.path("data/notes/n05.md")).expect("rm");
    std::fs::remove_dir_all(sync.path("data/deep")).expect("rm -r");
    let later = modified(&sync, "notes/n07.md") + std::time::Duration::from_secs(60);
    set_modified(&sync, "notes/n07.md", later);
    let kept = modified(&sync, "notes/n09.md");
    put(&sync, "notes/n09.md", "NOTE 9");
    set_modified(&sync, "notes/n09.md", kept);
    assert_eq!(run_logged(&sync, &[]).0, 0);
    let second = &sync.indexed()[22..];
    let mut sent_now = sent(second);
    sent_now.sort();
    assert_eq!(sent_now, ["notes/n03.md", "notes/new.md"], "{second:?}");
    let mut gone = deleted(second);
    gone.sort();
    assert_eq!(gone, ["deep/er/still/b.html", "notes/n05.md"]);

    // Nothing changed: nothing sent (the touched file's new time is kept).
    let before = sync.indexed().len();
    assert_eq!(run_logged(&sync, &[]).0, 0);
    assert_eq!(sync.indexed().len(), before, "nothing to send");

    // A file edited with its size and time kept is not read (that is what
    // makes an unchanged folder cheap); a full sync reads everything.
    let index = index_of(&sync.indexed());
    assert_eq!(index["notes/n09.md"], "note 9");
    assert_eq!(run_logged(&sync, &["--full"]).0, 0);
    assert_eq!(index_of(&sync.indexed()), folder_of(&sync.path("data")));
}

#[test]
fn globs_hidden_names_and_depth_choose_the_files() {
    let settings =
        r#", include = ["**/*.md", "*.txt"], exclude = ["drafts/**", "**/skip-*"], max_depth = 3"#;
    let sync = Sync::new(&folder(settings), "");
    for rel in [
        "a.txt",
        "b.md",
        "c.html",
        "sub/d.md",
        "sub/e.txt",
        "sub/skip-f.md",
        "drafts/g.md",
        ".hidden/h.md",
        "sub/.i.md",
        "one/two/j.md",
        "one/two/three/k.md",
    ] {
        put(&sync, rel, rel);
    }
    assert_eq!(run_logged(&sync, &[]).0, 0);
    let mut ids = sent(&sync.indexed());
    ids.sort();
    assert_eq!(ids, ["a.txt", "b.md", "one/two/j.md", "sub/d.md"]);

    // A file that leaves the globs is deleted like one that is gone.
    std::fs::rename(sync.path("data/b.md"), sync.path("data/b.markdown")).expect("mv");
    assert_eq!(run_logged(&sync, &[]).0, 0);
    assert_eq!(deleted(&sync.indexed()[4..]), ["b.md"]);
}

#[test]
fn links_are_followed_inside_the_folder_only() {
    let sync = Sync::new(&folder(""), "");
    put(&sync, "a.txt", "alpha");
    put(&sync, "sub/b.txt", "beta");
    std::fs::write(sync.path("secret.txt"), "outside the grant").expect("secret");
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, sync.path("data").join(name)).expect("symlink");
    };
    link("a.txt", "to-a.txt");
    link("sub", "to-sub");
    link("../secret.txt", "out-relative.txt");
    link(
        sync.path("secret.txt").to_str().expect("path"),
        "out-absolute.txt",
    );
    link("..", "sub/loop");
    link("missing.txt", "broken.txt");
    let (code, log) = run_logged(&sync, &[]);
    assert_eq!(code, 0, "refused links fail nothing");
    let lines = sync.indexed();
    let mut ids = sent(&lines);
    ids.sort();
    assert_eq!(ids, ["a.txt", "sub/b.txt", "to-a.txt", "to-sub/b.txt"]);
    assert!(
        !lines
            .iter()
            .any(|l| l.to_string().contains("outside the grant")),
        "nothing from outside the folder"
    );
    for (name, why) in [
        ("out-relative.txt", "a link out of the folder"),
        ("out-absolute.txt", "absolute path"),
        ("sub/loop", "(a loop)"),
        ("to-sub/loop", "(a loop)"),
        ("broken.txt", "a broken link"),
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("/data/{name}: ")) && l.contains(why)),
            "{name}: {why}\n{log}"
        );
    }
}

#[test]
fn bytes_go_as_base64_for_the_extractors() {
    let settings = r#"{ path = @file-connector, config = { paths = ["/data"] }, grants = { dirs = [{ host = "data", guest = "/data" }] } }"#;
    let stage = r#"{ name = "text", plugin = { path = @extract-text, config = { from = "base64", source = "content", format = "markdown" } } }"#;
    let sync = Sync::new(settings, stage);
    put(&sync, "readme.md", "# Title\n\nSome *words*.");
    std::fs::write(sync.path("data/blob.bin"), [0u8, 159, 146, 150]).expect("blob");
    assert_eq!(run_logged(&sync, &[]).0, 3, "the binary fails alone");
    let lines = sync.indexed();
    assert_eq!(sent(&lines), ["readme.md"]);
    assert_eq!(lines[0]["content_type"], "text/markdown");
    assert!(
        lines[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Some words.")),
        "{:?}",
        lines[0]
    );
}
