//! Live reload of a running `weir run`: SIGHUP and `--watch`, a config and
//! a plugin changed mid-run, bad changes refused.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use weir_tests::{Proc, plugin};

use super::{WEIR, hang_up, lines, slow_run};

#[test]
fn a_local_run_reloads_its_config_and_a_plugin_mid_run_and_refuses_bad_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    std::fs::create_dir_all(path.join("out")).expect("out");
    std::fs::copy(plugin("copy-fields"), path.join("move.wasm")).expect("stage");
    let config = path.join("run.toml");
    let count = 6000;
    let write = |version: &str, extra: &str| {
        std::fs::write(&config, slow_run(path, count, 500, version, extra)).expect("config");
    };
    write("v1", "");
    let log = path.join("run.log");
    let mut run = Proc::start(
        "run",
        Path::new(WEIR),
        &[
            "run",
            "--watch",
            "--no-progress",
            config.to_str().expect("utf-8"),
        ],
        &[],
        &log,
    );
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let wait = |run: &mut Proc, needle: &str, times: usize| {
        assert!(
            run.wait_for_log(&log, needle, times, Duration::from_secs(60)),
            "no {needle:?} ({times}) in the log:\n{}",
            read_log()
        );
    };
    wait(&mut run, "run started", 1);

    // 1. The config changes, and SIGHUP says so.
    write("v2", "");
    hang_up(&run);
    wait(&mut run, "config reloaded", 1);

    // A change that is invalid is refused with every problem; one that
    // needs a restart is refused saying so. The old stages go on.
    write("v3", "[[broken");
    wait(&mut run, "config reload refused", 1);
    write(
        "v3",
        "[[pipelines.stages]]\nname = \"x\"\nplugin = { path = \"missing.wasm\" }\n",
    );
    wait(&mut run, "config reload refused", 2);
    assert!(read_log().contains("missing.wasm"), "{}", read_log());
    std::fs::write(
        &config,
        slow_run(path, count, 500, "v3", "").replace("threads = 1", "threads = 3"),
    )
    .expect("config");
    wait(&mut run, "restart to apply it", 1);
    write("v2", "");

    // 2. The plugin changes on disk (same path, same settings): --watch.
    let replaced = path.join("move.wasm.new");
    std::fs::copy(plugin("rename-fields"), &replaced).expect("stage");
    std::fs::rename(&replaced, path.join("move.wasm")).expect("swap the stage");
    wait(&mut run, "generation=3", 1);

    let status = run.child.wait().expect("the run ends");
    assert_eq!(status.code(), Some(0), "{}", read_log());
    let docs = lines(&path.join("out/docs.jsonl"));
    assert_eq!(docs.len(), count as usize, "every document indexed once");
    // In publish order (one worker): v1 copied, then v2 copied, then v2
    // renamed; never back, never a refused version.
    let phase = |d: &Value| match (d["version"].as_str(), d.get("n").is_some()) {
        (Some("v1"), true) if d["m"] == d["n"] => 0,
        (Some("v2"), true) if d["m"] == d["n"] => 1,
        (Some("v2"), false) if d["m"].is_u64() => 2,
        _ => panic!("a document of no version: {d}"),
    };
    let mut ordered: Vec<(u64, usize)> = docs
        .iter()
        .map(|d| {
            let n = d["id"].as_str().and_then(|id| id.strip_prefix("doc-"));
            (n.and_then(|n| n.parse().ok()).expect("doc-<n>"), phase(d))
        })
        .collect();
    ordered.sort_unstable();
    let ids: std::collections::BTreeSet<u64> = ordered.iter().map(|(n, _)| *n).collect();
    assert_eq!(ids.len(), count as usize, "no id twice");
    let phases: Vec<usize> = ordered.iter().map(|(_, p)| *p).collect();
    assert!(
        phases.windows(2).all(|w| w[0] <= w[1]),
        "a later document ran on older stages"
    );
    for p in 0..3 {
        assert!(phases.contains(&p), "no document of phase {p}");
    }
}

/// The first reload of a run, with nothing but a plugin replaced on disk,
/// compares with the plugins the workers were started on (digested when
/// they were loaded), not with the files as they are now, which are the
/// new ones already.
#[test]
fn a_plugin_replaced_on_disk_is_taken_up_by_the_first_reload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    std::fs::create_dir_all(path.join("out")).expect("out");
    std::fs::copy(plugin("copy-fields"), path.join("move.wasm")).expect("stage");
    let config = path.join("run.toml");
    let count = 4000;
    std::fs::write(&config, slow_run(path, count, 400, "v1", "")).expect("config");
    let log = path.join("run.log");
    let mut run = Proc::start(
        "run",
        Path::new(WEIR),
        &["run", "--no-progress", config.to_str().expect("utf-8")],
        &[],
        &log,
    );
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        run.wait_for_log(&log, "run started", 1, Duration::from_secs(60)),
        "{}",
        read_log()
    );
    let replaced = path.join("move.wasm.new");
    std::fs::copy(plugin("rename-fields"), &replaced).expect("stage");
    std::fs::rename(&replaced, path.join("move.wasm")).expect("swap the stage");
    // One SIGHUP, the run's first reload.
    hang_up(&run);
    assert!(
        run.wait_for_log(&log, "generation=2", 1, Duration::from_secs(60)),
        "the first reload did not take up the plugin:\n{}",
        read_log()
    );
    assert!(
        !read_log().contains("nothing the workers run changed"),
        "{}",
        read_log()
    );
    let status = run.child.wait().expect("the run ends");
    assert_eq!(status.code(), Some(0), "{}", read_log());
    let docs = lines(&path.join("out/docs.jsonl"));
    assert_eq!(docs.len(), count as usize, "every document indexed once");
    // Copied (`n` and `m`) before the reload, renamed (`m` only) after.
    let renamed = docs.iter().filter(|d| d.get("n").is_none()).count();
    assert!(renamed > 0, "no document ran on the new plugin");
    assert!(
        docs.iter()
            .all(|d| d["m"].is_u64() && d.get("n").is_none_or(|n| *n == d["m"])),
        "a document of neither version"
    );
}
