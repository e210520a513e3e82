//! File I/O that never returns: a plugin that opens a FIFO with no writer in
//! its granted folder (open(2) waits for one) is stopped at its call deadline
//! like any other wait, the next document runs, and a whole `weir run` ends
//! on time (the thread left blocked in the FIFO holds up neither the worker
//! nor the exit).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use weir::plugin::{DirGrant, PluginError, StageInstance, TrapCause};
use weir_tests::{doc, runtime, spec, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// The call deadline of these tests' stage.
const DEADLINE: Duration = Duration::from_millis(300);

/// How late past its deadline a stuck call may end: the deadline is
/// enforced to a few epoch ticks, and a loaded test machine is slow.
const SLACK: Duration = Duration::from_secs(3);

/// A FIFO named `name` in `dir`.
fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("no NUL in a temp path");
    // SAFETY: `c_path` is a valid NUL-terminated path for the call's length.
    let made = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo {}", path.display());
    path
}

/// Let go of whatever is still blocked opening or reading `fifo` (the host
/// thread the stuck call left behind): open it for writing, which a
/// waiting reader lets succeed, and close it, which the reader reads as
/// the end of the file.
fn release(fifo: &Path) {
    let _ = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo);
}

/// The hostile stage, its `/data` the host folder `dir`.
fn hostile_reading(dir: &Path) -> StageInstance {
    let mut spec = spec("hostile-stage", json!({}));
    spec.limits.call_timeout = Some(DEADLINE);
    spec.grants.dirs.push(DirGrant::new(dir, "/data", false));
    runtime()
        .load_stage("hostile", &spec)
        .expect("load")
        .instantiate()
        .expect("instantiate")
}

/// Read `/data/<name>` through the stage: the error it ends with, and how long it took.
fn read_through(instance: &mut StageInstance, name: &str) -> (PluginError, Duration) {
    let mut d = doc(json!({ "id": "stuck", "action": "read", "path": format!("/data/{name}") }));
    let started = Instant::now();
    let error = instance
        .process(&mut d)
        .expect_err("the read never returns");
    (error, started.elapsed())
}

fn assert_stopped_at_the_deadline(error: &PluginError, took: Duration) {
    match error {
        PluginError::Trap {
            cause: TrapCause::Deadline(limit),
            ..
        } => assert_eq!(*limit, DEADLINE),
        other => panic!("expected the call deadline, got {other:?}"),
    }
    assert!(
        error
            .to_string()
            .contains("plugin `hostile` exceeded its call deadline of 300ms"),
        "{error}"
    );
    assert!(
        took >= DEADLINE && took < DEADLINE + SLACK,
        "stopped after {took:?}, for a deadline of {DEADLINE:?}"
    );
}

/// The next document, and a regular file, go through a working instance.
fn assert_recovers(instance: &mut StageInstance, dir: &Path) {
    std::fs::write(dir.join("ok.txt"), "fine").expect("write");
    let mut d = doc(json!({ "id": "next", "action": "read", "path": "/data/ok.txt" }));
    instance.process(&mut d).expect("the next document");
    assert_eq!(d.get_string("content").as_deref(), Some("fine"));
}

#[test]
fn opening_a_fifo_with_no_writer_ends_at_the_call_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pipe = fifo(dir.path(), "no-writer");
    let mut instance = hostile_reading(dir.path());
    // Opening a FIFO for reading blocks in open(2) until a writer comes.
    let (error, took) = read_through(&mut instance, "no-writer");
    assert_stopped_at_the_deadline(&error, took);
    assert_recovers(&mut instance, dir.path());
    assert_eq!(instance.restarts(), 1);
    release(&pipe);
}

#[test]
fn reading_a_fifo_whose_writer_never_writes_fails_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pipe = fifo(dir.path(), "silent");
    // Held open for writing (read-write: opening it so never blocks), never
    // written: the plugin's open succeeds. WASI reads at an offset, which a
    // FIFO refuses, so the read fails rather than waits for data.
    let writer = File::options()
        .read(true)
        .write(true)
        .open(&pipe)
        .expect("open the FIFO");
    let mut instance = hostile_reading(dir.path());
    let mut d = doc(json!({ "id": "silent", "action": "read", "path": "/data/silent" }));
    let started = Instant::now();
    let error = instance
        .process(&mut d)
        .expect_err("a FIFO cannot be read at an offset");
    assert!(started.elapsed() < DEADLINE, "{:?}", started.elapsed());
    assert!(
        error.is_document_error() && error.to_string().contains("cannot read /data/silent"),
        "{error}"
    );
    assert_recovers(&mut instance, dir.path());
    drop(writer);
}

#[test]
fn a_run_fails_the_document_stuck_in_a_fifo_runs_the_next_ones_and_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let pipe = fifo(&data, "fifo");
    let config = dir.path().join("config.toml");
    let toml = format!(
        r#"
        [runner]
        cache_dir = {cache:?}
        [worker]
        threads = 1
        [indexer]
        batch_timeout = "10ms"
        plugin = {{ path = @test-indexer }}
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ docs = [{{ id = "stuck", action = "read", path = "/data/fifo" }}], count = 5 }} }}
        [[pipelines]]
        name = "p"
        [[pipelines.stages]]
        name = "h"
        plugin = {{ path = @hostile-stage, limits = {{ call_timeout = "300ms" }}, grants = {{ dirs = [{{ host = {data:?}, guest = "/data" }}] }} }}
        "#,
        cache = dir.path().join("cache").display().to_string(),
        data = data.display().to_string(),
    );
    std::fs::write(&config, with_plugins(&toml)).expect("write config");
    let config = config.to_str().expect("utf-8 path").to_owned();
    let started = Instant::now();
    let mut child = Command::new(WEIR)
        .args(["run", "--no-progress", &config])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the weir binary starts");
    // Bounded: before the fix the worker (and then the exit) hung on the
    // FIFO for good.
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            release(&pipe);
            panic!("`weir run` was still running after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("output");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    release(&pipe);
    assert_eq!(
        status.code(),
        Some(3),
        "partial success: one document failed\n{printed}"
    );
    assert!(
        printed.contains("exceeded its call deadline of 300ms"),
        "{printed}"
    );
    // The summary's row: connector, pipeline, published, children,
    // succeeded, failed, ...
    let row: Vec<&str> = printed
        .lines()
        .map(str::split_whitespace)
        .map(Iterator::collect::<Vec<_>>)
        .find(|cells| cells.starts_with(&["c", "p"]))
        .unwrap_or_else(|| panic!("no summary row\n{printed}"));
    assert_eq!(
        row[2..6],
        ["6", "0", "5", "1"],
        "the documents after the stuck one ran\n{printed}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}
