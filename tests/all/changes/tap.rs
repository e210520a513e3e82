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
    let tapped = documents(&out);
    assert_eq!(tapped.len(), 5, "{out}");
    assert!(
        out.contains("tap ended after 5 documents: it has its 5 documents"),
        "{out}"
    );
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
    let tapped = documents(&out);
    assert_eq!(tapped.len(), 3, "{out}");
    assert!(
        tapped.iter().all(|l| l["document"].get("m").is_some()),
        "{out}"
    );
    // What the run does not have: refused, naming what it has.
    let (code, out) = weir(&["tap", &addr, "--pipeline", "nope"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("404") && out.contains("no pipeline `nope` (there are: p)"),
        "{out}"
    );
    let (code, out) = weir(&["tap", &addr, "--pipeline", "p", "--stage", "nada"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("pipeline `p` has no stage `nada` (it has: version, move;"),
        "{out}"
    );
    // Out of bounds: refused with the reason.
    let (code, out) = weir(&["tap", &addr, "--pipeline", "p", "--limit", "100000"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("limit 100000 is not from 1 to 10000"), "{out}");
    // A run that ends ends its taps: the reader is told, and exits 0.
    let mut tap = std::process::Command::new(WEIR)
        .args([
            "tap",
            &addr,
            "--pipeline",
            "p",
            "--limit",
            "10000",
            "--seconds",
            "3600",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("weir tap");
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(tap.stdout.as_mut().expect("stdout")),
        &mut first,
    )
    .expect("a line");
    assert!(first.contains("\"document\""), "{first}");
    run.stop();
    let ended = tap.wait_with_output().expect("weir tap ends");
    let err = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(0), "{err}");
    assert!(err.contains(": the run ended"), "{err}");

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
    let tapped = documents(&out);
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
    let lines: Vec<Value> = line
        .as_str()
        .expect("JSON lines")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(lines[0]["run_id"], id.as_str(), "{line}");
    assert_eq!(lines[1], serde_json::json!({ "end": "limit" }), "{line}");
    // A stage the run does not have is refused, from its config.
    let (status, line) = serve.call(
        "GET",
        &format!("/api/runs/{id}/tap?pipeline=acme-books&stage=nada"),
        Some(ACME),
        "",
    );
    assert_eq!(status, 404, "{line}");
    assert!(
        line.to_string()
            .contains("has no stage `nada` (it has: trim"),
        "{line}"
    );
    let (status, _) = serve.call("POST", &format!("/api/runs/{id}/stop"), Some(ACME), "");
    assert_eq!(status, 200);
    serve.ended(ACME, &id);
}

/// The tapped documents among `out`'s lines (what `weir tap` said on
/// standard error is not one).
fn documents(out: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}
