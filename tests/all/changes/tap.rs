//! `weir tap`: a bounded sample of live documents from a process's ops
//! server, and a tenant's own runs only in `weir serve`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use weir_tests::{Proc, plugin};

use crate::operations::{ACME, Serve, ZETA, generated, logged_address};

use super::{WEIR, slow_run, weir};

#[test]
fn weir_tap_prints_a_bounded_sample_of_live_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    std::fs::create_dir_all(path.join("out")).expect("out");
    std::fs::copy(plugin("copy-fields"), path.join("move.wasm")).expect("stage");
    let config = path.join("run.toml");
    let start = |tap: bool| {
        let extra = format!("[metrics]\naddr = \"127.0.0.1:0\"\ntap = {tap}\n");
        std::fs::write(&config, slow_run(path, 100_000, 400, "v1", &extra)).expect("config");
        let log = path.join(format!("run-{tap}.log"));
        let mut run = Proc::start(
            "run",
            Path::new(WEIR),
            &["run", "--no-progress", config.to_str().expect("utf-8")],
            &[],
            &log,
        );
        assert!(
            run.wait_for_log(&log, "run started", 1, Duration::from_secs(60)),
            "{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let addr = logged_address(
            &std::fs::read_to_string(&log).unwrap_or_default(),
            "metrics on http://",
        );
        (run, addr)
    };
    let (mut run, addr) = start(true);
    let (code, out) = weir(&[
        "tap",
        &addr,
        "--pipeline",
        "p",
        "--stage",
        "version",
        "--limit",
        "5",
    ]);
    assert_eq!(code, 0, "{out}");
    let tapped: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(tapped.len(), 5, "{out}");
    for line in &tapped {
        assert_eq!(line["stage"], "version");
        assert_eq!(line["document"]["version"], "v1");
        assert!(line["document"].get("m").is_none(), "tapped after `move`");
    }
    // Leaving the pipeline, sampled: every id is in the 25% by hash.
    let (code, out) = weir(&[
        "tap",
        &addr,
        "--pipeline",
        "p",
        "--limit",
        "3",
        "--percent",
        "25",
    ]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.lines().all(|l| l.contains("\"m\":")), "{out}");
    // Out of bounds: refused with the reason.
    let (code, out) = weir(&["tap", &addr, "--pipeline", "p", "--limit", "100000"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("limit 100000 is not from 1 to 10000"), "{out}");
    run.stop();

    // A process whose config does not allow taps refuses them.
    let (mut run, addr) = start(false);
    let (code, out) = weir(&["tap", &addr, "--pipeline", "p", "--limit", "1"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("403"), "{out}");
    run.stop();
}

#[test]
fn a_tenant_taps_its_own_runs_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(dir.path());
    let nop = r#"{ path = "nop_indexer.wasm" }"#;
    // At acme's 400 documents a second: a run that lasts.
    let (status, run) = serve.submit(ACME, &generated("acme-books", 100_000, nop));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("run id").to_owned();
    let tap = |token: &str| {
        let output = std::process::Command::new(WEIR)
            .args([
                "tap",
                &serve.url,
                "--run",
                &id,
                "--pipeline",
                "acme-books",
                "--stage",
                "trim",
                "--limit",
                "4",
            ])
            .env("WEIR_TOKEN", token)
            .output()
            .expect("weir tap");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, out, err) = tap(ACME);
    assert_eq!(code, Some(0), "{err}");
    let tapped: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(tapped.len(), 4, "{out}{err}");
    for line in &tapped {
        assert_eq!(line["run_id"], id.as_str());
        assert_eq!(line["document"]["title"], "a title", "trimmed");
    }
    // Another tenant cannot see the run, so cannot tap it.
    let (code, out, err) = tap(ZETA);
    assert_eq!(code, Some(1));
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("404"), "{err}");
    // Naming another run in the query changes nothing: this run's only.
    let (status, line) = serve.call(
        "GET",
        &format!("/api/runs/{id}/tap?pipeline=acme-books&limit=1&run_id=other"),
        Some(ACME),
        "",
    );
    assert_eq!(status, 200, "{line}");
    assert_eq!(line["run_id"], id.as_str(), "{line}");
    let (status, _) = serve.call("POST", &format!("/api/runs/{id}/stop"), Some(ACME), "");
    assert_eq!(status, 200);
    serve.ended(ACME, &id);
}
