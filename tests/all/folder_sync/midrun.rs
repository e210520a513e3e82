//! Files that change under a running sync: one that vanishes after the
//! folder was listed is deleted, one that can no longer be read is skipped
//! (what the index holds of it kept, tried again next run), and the run
//! goes on. The test holds the run at a known point without sleeping: a
//! stage opens a FIFO for the first file's document (open(2) waits for a
//! writer; the test sees the thread wait in /proc), so the connector is
//! stopped by backpressure a few files in, until the test opens it too.
//! (WASI reads files at offsets, which a FIFO refuses: the gate's own
//! document fails, and is the run's only failure.)
//! And the manifest way (a file listing files): a listed file edited in
//! place is sent again, a listed file removed fails its document alone.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use weir_tests::Proc;

use super::{WEIR, deleted, folder, folder_of, index_of, put, run_logged, sent};
use crate::sync::Sync;

/// Marks the document of `000-gate.txt` to read the FIFO `/gate/fifo`
/// (the hostile stage's `read`), and only it.
const GATE: &str = r#"
    { name = "mark", when = { field = "path", matches = '000-gate' }, plugin = { path = @set-static-values, config = { values = { action = "read", path = "/gate/fifo" } } } },
    { name = "gate", when = { field = "action", exists = true }, plugin = { path = @hostile-stage, config = {}, grants = { dirs = [{ host = "gate", guest = "/gate" }] } } }
"#;

fn mkfifo(path: &Path) {
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("no NUL in a temp path");
    // SAFETY: `c_path` is a valid NUL-terminated path for the call's length.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Whether a thread of process `pid` waits in open(2) of a FIFO for the
/// other end (Linux: its wchan is `wait_for_partner`).
fn waiting_for_a_fifo(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks.flatten().any(|task| {
                std::fs::read_to_string(task.path().join("wchan"))
                    .is_ok_and(|w| w.trim() == "wait_for_partner")
            })
        })
        .unwrap_or(false)
}

#[test]
fn a_file_that_vanishes_or_cannot_be_read_mid_run_fails_only_itself() {
    // One worker, queues of one: the connector is held a few documents
    // after the one the gate holds.
    let settings = "[worker]\nthreads = 1\n[publisher]\nqueue_capacity = 1";
    let sync = Sync::with(&folder(""), GATE, settings);
    std::fs::create_dir_all(sync.path("gate")).expect("gate dir");
    for i in 0..200 {
        put(&sync, &format!("f{i:03}.txt"), &format!("v1 {i}"));
    }
    put(&sync, "y-unreadable.txt", "y v1");
    put(&sync, "z-vanish.txt", "z v1");
    assert_eq!(run_logged(&sync, &[]).0, 0);
    assert_eq!(sync.indexed().len(), 202);

    let fifo = sync.path("gate/fifo");
    mkfifo(&fifo);
    put(&sync, "000-gate.txt", "gate");
    put(&sync, "y-unreadable.txt", "y v2");
    // Every file changed, so every one is sent: the pipeline fills up.
    for i in 0..200 {
        put(&sync, &format!("f{i:03}.txt"), &format!("v2 {i}"));
    }
    let log = sync.path("gated.log");
    let config = sync.path("run.toml");
    let mut run = Proc::start(
        "weir run",
        Path::new(WEIR),
        &["run", "--no-progress", config.to_str().expect("path")],
        &[],
        &log,
    );
    // The stage waits in open(2) for a writer: the run is at the gate's
    // document, the folder listed, the connector held by backpressure.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !waiting_for_a_fifo(run.child.id()) {
        let text = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "never at the gate: {}", text());
        assert!(
            matches!(run.child.try_wait(), Ok(None)),
            "ended: {}",
            text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_file(sync.path("data/z-vanish.txt")).expect("rm");
    // Root reads whatever its mode says: a file turned into a folder
    // cannot be read as a file by anyone.
    std::fs::remove_file(sync.path("data/y-unreadable.txt")).expect("rm");
    std::fs::create_dir(sync.path("data/y-unreadable.txt")).expect("mkdir");
    // Open it to write and close it: the stage's open returns.
    drop(
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .expect("a reader waits"),
    );
    let status = run.child.wait().expect("wait");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    print!("{text}");
    assert_eq!(status.code(), Some(3), "the run goes on; the gate failed");
    let letters = std::fs::read_dir(sync.path("dead-letters"))
        .expect("dead letters")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        letters.contains("000-gate.txt")
            && !letters.contains("y-unreadable")
            && !letters.contains("z-vanish"),
        "the gate's document alone failed: {letters}"
    );
    assert!(
        text.contains("/data/z-vanish.txt vanished while the run read it"),
        "{text}"
    );
    assert!(
        text.contains("/data/y-unreadable.txt cannot be read"),
        "{text}"
    );
    let second = &sync.indexed()[202..];
    assert_eq!(sent(second).len(), 200, "the f files");
    assert!(!sent(second).iter().any(|id| !id.starts_with('f')));
    assert_eq!(deleted(second), ["z-vanish.txt"]);
    let index = index_of(&sync.indexed());
    assert_eq!(
        index["y-unreadable.txt"], "y v1",
        "what the index held is kept"
    );

    // Readable again: the next run sends it.
    std::fs::remove_dir(sync.path("data/y-unreadable.txt")).expect("rmdir");
    put(&sync, "y-unreadable.txt", "y v3");
    std::fs::remove_file(&fifo).expect("rm fifo");
    std::fs::remove_file(sync.path("data/000-gate.txt")).expect("rm gate");
    assert_eq!(run_logged(&sync, &[]).0, 0);
    assert_eq!(sent(&sync.indexed()[403..]), ["y-unreadable.txt"]);
    assert_eq!(index_of(&sync.indexed()), folder_of(&sync.path("data")));
}

#[test]
fn a_manifest_sees_its_listed_files_change_and_a_removed_one_fails_alone() {
    let connector = r#"{ path = @file-connector, config = { paths = ["/data/files.jsonl"], incremental = true, file_field = "path" }, grants = { dirs = [{ host = "data", guest = "/data" }] } }"#;
    let stage = r#"{ name = "text", plugin = { path = @extract-text, config = { from = "file", source = "path" }, grants = { dirs = [{ host = "data", guest = "/data" }] } } }"#;
    let sync = Sync::new(connector, stage);
    let manifest: String = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{{\"id\": \"{n}\", \"path\": \"/data/docs/{n}.txt\"}}\n"))
        .collect();
    put(&sync, "files.jsonl", &manifest);
    for n in ["a", "b", "c"] {
        put(&sync, &format!("docs/{n}.txt"), &format!("{n}{n}{n}{n}"));
    }
    assert_eq!(run_logged(&sync, &[]).0, 0);
    assert_eq!(sync.indexed().len(), 3);

    // b edited in place (same size), a touched (same bytes).
    put(&sync, "docs/b.txt", "BBBB");
    put(&sync, "docs/a.txt", "aaaa");
    assert_eq!(run_logged(&sync, &[]).0, 0);
    let second = &sync.indexed()[3..];
    assert_eq!(sent(second), ["b"]);
    assert_eq!(second[0]["text"], "BBBB");

    // c removed: its record is sent as listed, its extraction fails that
    // document alone (partial success), and nothing else is sent.
    std::fs::remove_file(sync.path("data/docs/c.txt")).expect("rm");
    let (code, log) = run_logged(&sync, &[]);
    assert_eq!(code, 3, "partial success, not a failed run");
    assert!(
        log.contains("the listed file /data/docs/c.txt cannot be read"),
        "{log}"
    );
    assert_eq!(sync.indexed().len(), 4, "only b so far");
}
