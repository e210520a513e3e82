//! The structural checks, each problem with its location.

use crate::config::tests::{MINIMAL, assert_reported, parse};

#[test]
fn the_stall_timeout_outlasts_every_call_a_document_waits_on() {
    let config = parse(MINIMAL, &[("WEIR__RUNNER__STALL_TIMEOUT", "31s")]).expect("valid");
    assert!(
        config
            .check()
            .iter()
            .all(|e| e.location != "runner.stall_timeout")
    );
    let config = parse(MINIMAL, &[("WEIR__RUNNER__STALL_TIMEOUT", "30s")]).expect("valid");
    let errors = config.check();
    let error = errors
        .iter()
        .find(|e| e.location == "runner.stall_timeout")
        .expect("the default 30 s call timeout is not shorter");
    assert!(error.message.contains("call_timeout 30s"), "{error}");
    let config = parse(MINIMAL, &[("WEIR__RUNNER__LIVENESS_TIMEOUT", "0s")]).expect("valid");
    assert!(
        config
            .check()
            .iter()
            .any(|e| e.location == "runner.liveness_timeout")
    );
}

#[test]
fn check_reports_every_structural_error() {
    let text = MINIMAL.replace("pipeline = \"p\"", "pipeline = \"nope\"")
        + "\n[worker]\nthreads = 0\n[[pipelines]]\nname = \"p\"\n";
    let config = parse(&text, &[]).expect("parses");
    let errors = config.check();
    let locations: Vec<&str> = errors.iter().map(|e| e.location.as_str()).collect();
    for expected in [
        "connectors.c.pipeline",
        "pipelines.p",
        "worker.threads",
        "connectors.c.plugin.path",
        "connectors.c.plugin.grants.dirs[0].host",
        "pipelines.p.stages.s.plugin.path",
        "indexer.plugin.path",
    ] {
        assert!(
            locations.contains(&expected),
            "{expected} missing from {locations:?}"
        );
    }
}

#[test]
fn instance_policy_and_digest_are_checked() {
    let text = MINIMAL
        .replace(
            r#"plugin = { path = "idx.wasm" }"#,
            r#"plugin = { path = "idx.wasm", instance = "fresh", sha256 = "abc" }"#,
        )
        .replace(
            r#"config = { a = 1 } }"#,
            r#"config = { a = 1 }, instance = "fresh", limits = { log_lines_per_second = 0 } }"#,
        );
    let errors = parse(&text, &[]).expect("parses").check();
    let messages = assert_reported(
        &errors,
        &[
            "indexer.plugin.instance: only stages can have a fresh instance per document",
            "indexer.plugin.sha256: must be 64 hexadecimal digits (a SHA-256)",
            "pipelines.p.stages.s.plugin.limits.log_lines_per_second: must be at least 1",
        ],
    );
    assert!(
        !messages
            .iter()
            .any(|m| m.contains("stages.s.plugin.instance")),
        "a stage may be fresh: {messages:?}"
    );
}
