//! `weir run --every`: a config run again on a schedule until SIGTERM,
//! runs never overlapping, and bad schedules refused before anything runs.

use std::path::Path;
use std::time::Duration;

use weir_tests::{Proc, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// Documents in the source: each run indexes them all again.
const DOCS: usize = 5;

#[test]
fn a_config_runs_again_on_its_schedule_until_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["data", "out"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
    }
    let lines: String = (0..DOCS)
        .map(|i| format!("{{\"id\":\"d{i}\",\"t\":\"v{i}\"}}\n"))
        .collect();
    std::fs::write(dir.path().join("data/in.jsonl"), lines).expect("source");
    let config = with_plugins(
        r#"
        [[connectors]]
        name = "source"
        pipeline = "main"
        plugin = { path = @file-connector, config = { paths = ["/data/in.jsonl"], incremental = false }, grants = { dirs = [{ host = "data", guest = "/data" }] } }
        [[pipelines]]
        name = "main"
        stages = []
        [indexer]
        plugin = { path = @jsonl-indexer, config = { path = "/out/out.jsonl", append = true }, grants = { dirs = [{ host = "out", guest = "/out", writable = true }] } }
        "#,
    );
    let config_path = dir.path().join("run.toml");
    std::fs::write(&config_path, config).expect("config");
    let log = dir.path().join("every.log");
    let mut weir = Proc::start(
        "weir run --every",
        Path::new(WEIR),
        &[
            "run",
            "--no-progress",
            "--every",
            "2s",
            config_path.to_str().expect("path"),
        ],
        &[("RUST_LOG", "weir=info".to_owned())],
        &log,
    );
    // Three runs done, each followed by the line naming the next start
    // (printed just before the wait). Generous: plugins compile on a cold cache.
    let waited = weir.wait_for_log(&log, "next run at", 3, Duration::from_secs(600));
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(waited, "three scheduled runs: {}", text());
    // SAFETY: kill(2) on our own child's pid.
    let sent = unsafe { libc::kill(i32::try_from(weir.child.id()).expect("pid"), libc::SIGTERM) };
    assert_eq!(sent, 0, "SIGTERM sent");
    let status = weir.child.wait().expect("weir exits");
    let text = text();
    // The signal landed while waiting (almost always: each wait is about
    // two seconds) and ended it at once with the last run's code, 0; or, on
    // a machine slow enough for the next run to have started, that run
    // drained and the loop ended with its code.
    if text.contains("stopped while waiting for the next run") {
        assert_eq!(status.code(), Some(0), "{text}");
    } else {
        assert!(
            text.contains("interrupted: no more scheduled runs"),
            "the loop ended on the signal: {text}"
        );
        assert!(matches!(status.code(), Some(0 | 130)), "{status:?}: {text}");
    }
    // Runs never overlap: each "run started" is followed by its "run ended"
    // before the next starts.
    let marks: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            if l.contains("run started") {
                Some("started")
            } else if l.contains("run ended") {
                Some("ended")
            } else {
                None
            }
        })
        .collect();
    assert!(
        marks.iter().filter(|m| **m == "ended").count() >= 3,
        "{text}"
    );
    for (i, mark) in marks.iter().enumerate() {
        let expected = if i % 2 == 0 { "started" } else { "ended" };
        assert_eq!(*mark, expected, "run marks in order {marks:?}: {text}");
    }
    // Each run printed its summary, and indexed every document again.
    assert!(text.matches("next run at").count() >= 3, "{text}");
    let indexed = std::fs::read_to_string(dir.path().join("out/out.jsonl")).unwrap_or_default();
    assert!(
        indexed.lines().count() >= 3 * DOCS,
        "{} lines indexed: {text}",
        indexed.lines().count()
    );
}

/// `weir run --every ...` on a config that is not read: the schedule is checked first.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let output = std::process::Command::new(WEIR)
        .arg("run")
        .args(args)
        .arg("no-such-config.toml")
        .output()
        .expect("weir starts");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_bad_schedule_exits_2_naming_it() {
    for (args, named) in [
        (&["--every", "0s"][..], "\"0s\""),
        (&["--every", "61 * * * *"][..], "61 * * * *"),
        (&["--every", "400days"][..], "400days"),
        (
            &["--every", "0 3 * * *", "--time-zone", "Mars/Olympus"][..],
            "Mars/Olympus",
        ),
        (&["--every", "1m", "--jitter", "5m"][..], "5m"),
    ] {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--every"), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?} names {named}: {stderr}");
    }
    // A zone or a jitter without --every is a usage error.
    let (code, stderr) = refused(&["--jitter", "5s"]);
    assert_eq!(code, Some(2), "{stderr}");
}
