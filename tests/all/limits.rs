//! Every limit a config accepts is one the runtime gives, and a plugin that
//! hits one is told Weir's limit (`limits.max_children`, `limits.max_depth`,
//! `limits.max_document_mib`), never the engine's or the parser's.

use std::time::Duration;

use serde_json::json;
use weir::plugin::{PluginError, StageInstance, TrapCause};
use weir_tests::{doc, runtime, spec};

fn hostile(max_children: u32) -> StageInstance {
    let mut spec = spec("hostile-stage", json!({}));
    spec.limits.call_timeout = Some(Duration::from_secs(120));
    spec.limits.max_children = Some(max_children);
    runtime()
        .load_stage("hostile", &spec)
        .expect("load")
        .instantiate()
        .expect("instantiate")
}

#[test]
fn more_children_than_the_engines_own_handle_cap_are_held_up_to_max_children() {
    // wasmtime caps a store's live handles at 100,000 unless told more.
    let mut instance = hostile(120_000);
    let mut d = doc(json!({ "id": "d", "action": "children", "count": "110000" }));
    let children = instance
        .process(&mut d)
        .expect("110,000 children are within limits.max_children");
    assert_eq!(children.len(), 110_000);
    let mut d = doc(json!({ "id": "d", "action": "children", "count": "120001" }));
    match instance.process(&mut d) {
        Err(PluginError::Trap {
            cause: TrapCause::Limit(hit),
            ..
        }) => assert!(
            hit.contains("more than 120000 documents") && hit.contains("limits.max_children"),
            "{hit}"
        ),
        other => panic!("expected the children limit, got {other:?}"),
    }
}

#[test]
fn json_nested_past_the_parsers_own_limit_names_max_depth() {
    let mut instance = hostile(10);
    for depth in ["200", "100000"] {
        let mut d = doc(json!({ "id": "d", "action": "deep_json", "depth": depth }));
        let error = instance.process(&mut d).expect_err("too deep");
        assert!(error.is_document_error(), "{error}");
        let text = error.to_string();
        assert!(text.contains("(limits.max_depth)"), "{text}");
        assert!(!text.contains("recursion limit"), "{text}");
    }
    let mut d = doc(json!({ "id": "d", "action": "deep_json", "depth": "10" }));
    instance.process(&mut d).expect("10 levels are fine");
}

/// The highest resident memory of process `child` (its `VmHWM`, read while
/// it runs: it only grows), in MiB, once it has ended.
fn peak_mib(child: &mut std::process::Child) -> f64 {
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0.0f64;
    loop {
        if let Some(kib) = std::fs::read_to_string(&status).ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        }) {
            peak = peak.max(kib / 1024.0);
        }
        if child.try_wait().expect("wait").is_some() {
            return peak;
        }
        // A sample every 20 ms: the peak only grows, so a late read loses
        // nothing but what the last 20 ms added.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 4M connector-state keys of 8 bytes (32 MB of text, within 64 MiB)
/// once took the host to 723 MB: `limits.max_state_mib` now counts what
/// the host holds for each key, so the connector is refused, naming the
/// limit, with the host near what the limit says.
#[test]
fn connector_state_is_bounded_by_what_the_host_holds_for_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        weir_tests::with_plugins(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = @test-connector, config = { state_keys = 4000000 }, limits = { max_state_mib = 64 } }
            [[pipelines]]
            name = "p"
            [indexer]
            plugin = { path = @test-indexer }
            "#,
        ),
    )
    .expect("config");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_weir-under-test"))
        .args(["run", "--no-progress", config.to_str().expect("utf-8")])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("run.log")).expect("log"))
        .spawn()
        .expect("weir run");
    let peak = peak_mib(&mut child);
    let log = std::fs::read_to_string(dir.path().join("run.log")).expect("log");
    println!("peak RSS of a run whose connector fills 64 MiB of state: {peak:.0} MiB");
    assert_eq!(child.wait().expect("ended").code(), Some(1), "{log}");
    assert!(
        log.contains("limits.max_state_mib") && log.contains("bytes a key"),
        "{log}"
    );
    // The run's own memory (runtime, compiled plugins) and 64 MiB of
    // state counted as the host holds it, with room for the allocator.
    assert!(peak < 64.0 * 2.0 + 200.0, "{peak:.0} MiB");
}

/// State kept under a looser `limits.max_state_mib` is refused as the next
/// run loads it, before the rest is read, naming the limit and the key it
/// reached: the run stops with the reason instead of holding it all.
#[test]
fn state_past_the_limit_is_refused_as_a_run_loads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("run.toml");
    let run = |keys: u64, mib: u64| {
        std::fs::write(
            &config,
            weir_tests::with_plugins(&format!(
                r#"
                # The keys are the connector's config: not a new source.
                [state]
                track_source = false
                [[connectors]]
                name = "c"
                pipeline = "p"
                plugin = {{ path = @test-connector, config = {{ state_keys = {keys} }}, limits = {{ max_state_mib = {mib} }} }}
                [[pipelines]]
                name = "p"
                [indexer]
                plugin = {{ path = @test-indexer }}
                "#
            )),
        )
        .expect("config");
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir-under-test"))
            .args(["run", "--no-progress", config.to_str().expect("utf-8")])
            .output()
            .expect("weir run");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // 20,000 keys of 8 bytes: ~4 MB as the host holds them.
    let (code, log) = run(20_000, 64);
    assert_eq!(code, Some(0), "{log}");
    let (code, log) = run(0, 1);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("cannot be read")
            && log.contains("limits.max_state_mib = 1")
            && log.contains("when key `k"),
        "{log}"
    );
    // Within a limit that holds it, it loads as before.
    let (code, log) = run(0, 64);
    assert_eq!(code, Some(0), "{log}");
}
