//! `weir run --every`: a config run again on a schedule until SIGTERM,
//! runs never overlapping, and bad schedules refused before anything runs.

use std::path::Path;
use std::time::Duration;

use weir_tests::{Proc, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// Documents in the source: each run indexes them all again.
const DOCS: usize = 5;

/// A config (with `settings`) reading `docs` documents from a file (all
/// of them each run) through `stages` into an appending JSONL file, run by `weir run --every
/// <every>`, logging to `every.log`.
struct Scheduled {
    dir: tempfile::TempDir,
    weir: Proc,
}

impl Scheduled {
    fn start(every: &str, docs: usize, stages: &str, settings: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["data", "out"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
        }
        let lines: String = (0..docs)
            .map(|i| format!("{{\"id\":\"d{i}\",\"t\":\"v{i}\"}}\n"))
            .collect();
        std::fs::write(dir.path().join("data/in.jsonl"), lines).expect("source");
        let config = with_plugins(&format!(
            r#"
            {settings}
            [[connectors]]
            name = "source"
            pipeline = "main"
            plugin = {{ path = @file-connector, config = {{ paths = ["/data/in.jsonl"], incremental = false }}, grants = {{ dirs = [{{ host = "data", guest = "/data" }}] }} }}
            [[pipelines]]
            name = "main"
            stages = [{stages}]
            [indexer]
            plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/out.jsonl", append = true }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
            "#
        ));
        let config_path = dir.path().join("run.toml");
        std::fs::write(&config_path, config).expect("config");
        let weir = Proc::start(
            "weir run --every",
            Path::new(WEIR),
            &[
                "run",
                "--no-progress",
                "--every",
                every,
                config_path.to_str().expect("path"),
            ],
            &[("RUST_LOG", "weir=info".to_owned())],
            &dir.path().join("every.log"),
        );
        Self { dir, weir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("every.log")).unwrap_or_default()
    }

    /// Wait (generously: plugins compile on a cold cache) until `needle`
    /// has been logged `times` times.
    fn wait_for(&mut self, needle: &str, times: usize) {
        let log = self.dir.path().join("every.log");
        let seen = self
            .weir
            .wait_for_log(&log, needle, times, Duration::from_secs(600));
        assert!(seen, "{needle:?} {times} times: {}", self.log());
    }

    /// SIGTERM; the exit status and the whole log.
    fn stop(mut self) -> (std::process::ExitStatus, String, usize) {
        // SAFETY: kill(2) on our own child's pid.
        let sent = unsafe {
            libc::kill(
                i32::try_from(self.weir.child.id()).expect("pid"),
                libc::SIGTERM,
            )
        };
        assert_eq!(sent, 0, "SIGTERM sent");
        let status = self.weir.child.wait().expect("weir exits");
        let indexed = std::fs::read_to_string(self.dir.path().join("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .count();
        (status, self.log(), indexed)
    }
}

/// The runs of `log` never overlap: each "run started" is followed by its
/// "run ended" before the next starts. How many ended.
fn runs_one_at_a_time(log: &str) -> usize {
    let marks: Vec<&str> = log
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
    for (i, mark) in marks.iter().enumerate() {
        let expected = if i % 2 == 0 { "started" } else { "ended" };
        assert_eq!(*mark, expected, "run marks in order {marks:?}: {log}");
    }
    marks.iter().filter(|m| **m == "ended").count()
}

/// The process ended on SIGTERM: at once while waiting, with the last
/// run's code (0); or, when the signal came during a run (a machine slow
/// enough for the next to have started), after that run drained, with its
/// code.
fn ended_on_the_signal(status: std::process::ExitStatus, log: &str) {
    if log.contains("stopped while waiting for the next run") {
        assert_eq!(status.code(), Some(0), "{log}");
    } else {
        assert!(
            log.contains("interrupted: no more scheduled runs"),
            "the loop ended on the signal: {log}"
        );
        assert!(matches!(status.code(), Some(0 | 130)), "{status:?}: {log}");
    }
}

#[test]
fn a_config_runs_again_on_its_schedule_until_sigterm() {
    let mut scheduled = Scheduled::start("2s", DOCS, "", "");
    // Three runs done, each followed by the line naming the next start
    // (printed just before the wait, which lasts about two seconds).
    scheduled.wait_for("next run at", 3);
    let (status, log, indexed) = scheduled.stop();
    ended_on_the_signal(status, &log);
    assert!(runs_one_at_a_time(&log) >= 3, "{log}");
    // Each run printed its summary, and indexed every document again.
    assert!(log.matches("Success in").count() >= 3, "{log}");
    assert!(indexed >= 3 * DOCS, "{indexed} lines indexed: {log}");
}

#[test]
fn a_run_longer_than_the_interval_skips_the_starts_it_missed() {
    // 400 documents at 5 ms each in one worker thread: over 2 s a run, every 1 s.
    let slow =
        r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 5000 } } }"#;
    let mut scheduled = Scheduled::start("1s", 400, slow, "[worker]\nthreads = 1");
    scheduled.wait_for("skipped (runs never overlap)", 2);
    let (status, log, _) = scheduled.stop();
    ended_on_the_signal(status, &log);
    assert!(runs_one_at_a_time(&log) >= 2, "{log}");
    // Each warning says how many starts were skipped and when the next is.
    let warning = log
        .lines()
        .find(|l| l.contains("skipped (runs never overlap)"))
        .expect("a warning");
    assert!(warning.contains("the next is at 20"), "{warning}");
    assert!(
        warning.contains("1 start skipped") || warning.contains("starts skipped"),
        "{warning}"
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

#[test]
fn a_config_that_never_ends_is_refused_a_schedule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |schedule: &str| {
        with_plugins(&format!(
            r#"
            {schedule}
            [[connectors]]
            name = "endless"
            pipeline = "main"
            continuous = true
            plugin = {{ path = @generator-connector, config = {{ forever = true }} }}
            [[pipelines]]
            name = "main"
            [indexer]
            plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/out.jsonl" }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
            "#
        ))
    };
    std::fs::create_dir_all(dir.path().join("out")).expect("out");
    let own = dir.path().join("own.toml");
    std::fs::write(&own, config("[schedule]\nevery = \"1h\"")).expect("config");
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, config("")).expect("config");
    for (args, says) in [
        (vec!["validate", own.to_str().expect("path")], "schedule"),
        (
            vec!["run", "--no-progress", own.to_str().expect("path")],
            "schedule",
        ),
        (
            vec![
                "run",
                "--no-progress",
                "--every",
                "1h",
                plain.to_str().expect("path"),
            ],
            "--every",
        ),
    ] {
        let output = std::process::Command::new(WEIR)
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("weir starts");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}{stdout}");
        let said = format!("{stderr}{stdout}");
        assert!(
            said.contains(says) && said.contains("`endless` never ends"),
            "{args:?}: {said}"
        );
    }
    assert!(
        !dir.path().join("out/out.jsonl").exists(),
        "nothing ran: {:?}",
        std::fs::read_dir(dir.path().join("out")).map(|d| d.count())
    );
}
