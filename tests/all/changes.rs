//! Changing pipelines safely: pipeline tests (`weir test <config>`), live
//! reload of a running `weir run` (SIGHUP and `--watch`), shadow stages and
//! `weir tap` (a process's ops server, and a tenant's run in `weir serve`).
//! The Kafka worker reload is in `kafka.rs`, with the cluster it needs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use weir_tests::{Proc, plugin, plugins_dir, repo_root, with_plugins};

use crate::operations::{ACME, Serve, ZETA, generated, logged_address};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// `weir args...`: exit code and everything it printed.
fn weir(args: &[&str]) -> (u8, String) {
    let output = std::process::Command::new(WEIR)
        .args(args)
        .output()
        .expect("the weir binary starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let code = output.status.code().and_then(|c| u8::try_from(c).ok());
    (code.expect("weir exits with a code"), text)
}

/// The text of `example` with its plugin paths pointed at the built
/// plugins, its input at the example's data and its output at `out`.
pub(crate) fn example_text(example: &Path, out: &Path) -> String {
    let examples = example.parent().expect("a directory");
    std::fs::read_to_string(example)
        .expect("the example")
        .replace(
            "\"../plugins/dist/",
            &format!("\"{}/", plugins_dir().display()),
        )
        .replace(
            "host = \"data\"",
            &format!("host = {:?}", examples.join("data").display().to_string()),
        )
        .replace(
            "host = \"out\"",
            &format!("host = {:?}", out.display().to_string()),
        )
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// An example config with its plugin paths pointed at the built plugins
/// and its directories at the example's, in `dir`.
fn example_in(example: &Path, dir: &Path) -> PathBuf {
    let text = example_text(example, dir);
    let path = dir.join(example.file_name().expect("a file"));
    std::fs::write(&path, text).expect("write the config");
    path
}

#[test]
fn every_examples_pipeline_cases_pass() {
    let examples = repo_root().join("examples");
    let mut found = 0;
    for entry in std::fs::read_dir(&examples).expect("examples/") {
        let cases = entry.expect("an entry").path();
        let Some(name) = cases.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".cases.toml") else {
            continue;
        };
        found += 1;
        let dir = tempfile::tempdir().expect("tempdir");
        let config = example_in(&examples.join(format!("{stem}.toml")), dir.path());
        let (code, out) = weir(&[
            "test",
            config.to_str().expect("utf-8"),
            "--cases",
            cases.to_str().expect("utf-8"),
        ]);
        assert_eq!(code, 0, "{name}:\n{out}");
        assert!(out.contains("cases passed"), "{out}");
    }
    assert!(found > 0, "no examples/*.cases.toml");
}

#[test]
fn a_failing_pipeline_case_reports_each_difference_by_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("p.toml");
    std::fs::write(
        &config,
        with_plugins(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = { path = @test-connector, config = { count = 1 } }
            [[pipelines]]
            name = "p"
            [[pipelines.stages]]
            name = "trim"
            plugin = { path = @trim-whitespace, config = { fields = ["title"] } }
            [[pipelines.stages]]
            name = "gone"
            plugin = { path = @drop-document, config = { field = "status", values = ["gone"] } }
            [indexer]
            plugin = { path = @nop-indexer }
            "#,
        ),
    )
    .expect("config");
    // Beside the config: found without --cases.
    std::fs::write(
        dir.path().join("p.cases.toml"),
        r#"
        [[cases]]
        name = "titles are trimmed"
        input = [{ id = "1", title = "  Emma  " }]
        expect = [{ document = { id = "1", title = "Emma" } }]

        [[cases]]
        name = "a wrong expectation"
        input = [{ id = "2", title = " Ivanhoe ", year = 1819 }, { id = "3", status = "gone" }]
        expect = [{ document = { id = "2", title = "IVANHOE", year = 1820 } }, { document = { id = "3" } }]

        [[cases]]
        name = "only the first stage"
        after = "trim"
        input = [{ id = "4", title = " x ", status = "gone" }]
        expect = [{ document = { id = "4", title = "x", status = "gone" } }]
        "#,
    )
    .expect("cases");
    let (code, out) = weir(&["test", config.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("ok      titles are trimmed"), "{out}");
    assert!(out.contains("ok      only the first stage"), "{out}");
    assert!(out.contains("FAILED  a wrong expectation"), "{out}");
    assert!(
        out.contains(r#"document.title: expected "IVANHOE", actual "Ivanhoe""#),
        "{out}"
    );
    assert!(
        out.contains("document.year: expected 1820, actual 1819"),
        "{out}"
    );
    assert!(
        out.contains(r#"expected: {"document":{"id":"3"}}"#)
            && out.contains(r#"actual:   {"event":"DROP","id":"3"}"#),
        "{out}"
    );
    assert!(out.contains("2 of 3 cases passed"), "{out}");

    // A case naming a stage the pipeline does not have is an invalid file.
    let bad = dir.path().join("bad.cases.toml");
    std::fs::write(
        &bad,
        "[[cases]]\nname = \"x\"\nbefore = \"nope\"\ninput = [{ id = \"1\" }]\n",
    )
    .expect("cases");
    let (code, out) = weir(&[
        "test",
        config.to_str().expect("utf-8"),
        "--cases",
        bad.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no stage `nope`"), "{out}");
}

/// A run of `count` documents at `per_second` through a stage that stamps
/// `version` and one (`move`, the component at `dir/move.wasm`) that maps
/// `n` to `m`, into `dir/out/docs.jsonl`; `extra` is appended.
fn slow_run(dir: &Path, count: u64, per_second: u32, version: &str, extra: &str) -> String {
    with_plugins(&format!(
        r#"
        [publisher]
        max_docs_per_second = {per_second}
        [worker]
        threads = 1
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ count = {count} }} }}
        [[pipelines]]
        name = "p"
        [[pipelines.stages]]
        name = "version"
        plugin = {{ path = @set-static-values, config = {{ values = {{ version = "{version}" }} }} }}
        [[pipelines.stages]]
        name = "move"
        plugin = {{ path = {stage:?}, config = {{ mappings = [{{ source = "n", target = "m" }}] }} }}
        [indexer]
        plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/docs.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        {extra}
        "#,
        stage = dir.join("move.wasm").display().to_string(),
        out = dir.join("out").display().to_string(),
    ))
}

fn hang_up(process: &Proc) {
    let pid = process.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
}

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

#[test]
fn a_shadow_stage_reports_where_it_differs_and_never_reaches_the_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    std::fs::create_dir_all(path.join("out")).expect("out");
    std::fs::copy(plugin("copy-fields"), path.join("move.wasm")).expect("stage");
    let run = |name: &str, shadow: &str| {
        let config = path.join(format!("{name}.toml"));
        let report = path.join(format!("{name}.shadow.jsonl"));
        let text = slow_run(path, 300, 100_000, "v1", "").replace(
            "config = { values = { version = \"v1\" } } }",
            &format!(
                "config = {{ values = {{ version = \"v1\" }} }} }}\nshadow = {{ plugin = {{ path = {:?}, config = {{ values = {{ version = \"v2\", extra = 1 }} }} }}, report = {:?}, {shadow} }}",
                plugin("set-static-values").display().to_string(),
                report.display().to_string()
            ),
        );
        std::fs::write(&config, text).expect("config");
        let _ = std::fs::remove_file(path.join("out/docs.jsonl"));
        let (code, out) = weir(&["run", "--no-progress", config.to_str().expect("utf-8")]);
        assert_eq!(code, 0, "{out}");
        let indexed = lines(&path.join("out/docs.jsonl"));
        assert_eq!(indexed.len(), 300);
        assert!(
            indexed
                .iter()
                .all(|d| d["version"] == "v1" && d.get("extra").is_none()),
            "the shadow's output reached the index"
        );
        (lines(&report), out)
    };
    // Every document: each differs in `version` and `extra`, by field.
    let (all, out) = run("all", "percent = 100");
    assert_eq!(all.len(), 300, "{out}");
    let first = &all[0];
    assert_eq!(first["stage"], "version");
    let differences = first["differences"].as_array().expect("differences");
    assert!(
        differences.contains(
            &serde_json::json!({ "field": "document.version", "live": "v1", "shadow": "v2" })
        ),
        "{first}"
    );
    assert!(
        differences.contains(&serde_json::json!({ "field": "document.extra", "shadow": 1 })),
        "{first}"
    );
    assert!(out.contains("compared=300 differing=300"), "{out}");
    // Named ids only; then a sample, by id hash, of about a tenth.
    let (named, _) = run("ids", "percent = 0, ids = [\"doc-3\", \"doc-77\"]");
    let mut ids: Vec<&str> = named.iter().filter_map(|l| l["id"].as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["doc-3", "doc-77"]);
    let (sampled, _) = run("sample", "percent = 10");
    assert!(
        (10..=60).contains(&sampled.len()),
        "{} of 300 sampled at 10%",
        sampled.len()
    );
    // The same ids are sampled every time.
    let (again, _) = run("sample", "percent = 10");
    assert_eq!(again.len(), 2 * sampled.len(), "appended, the same ids");
}

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

#[test]
fn a_tenant_reloads_its_live_run_in_weir_serve_and_bad_changes_are_refused() {
    for isolation in ["process", "thread"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut serve = Serve::start_with(dir.path(), &format!("isolation = {isolation:?}"));
        let nop = r#"{ path = "nop_indexer.wasm" }"#;
        let config = generated("acme-books", 100_000, nop);
        let (status, run) = serve.submit(ACME, &config);
        assert_eq!(status, 201, "{run}");
        let id = run["id"].as_str().expect("run id").to_owned();
        let title = |token: &str| {
            let (status, line) = serve.call(
                "GET",
                &format!("/api/runs/{id}/tap?pipeline=acme-books&stage=trim&limit=1"),
                Some(token),
                "",
            );
            assert_eq!(status, 200, "{isolation}: {line}");
            line["document"]["title"].clone()
        };
        assert_eq!(title(ACME), "a title", "{isolation}: trimmed");
        let put = |token: &str, body: &str| {
            serve.call("PUT", &format!("/api/runs/{id}/config"), Some(token), body)
        };

        // The stage's settings change: every worker switches before the
        // answer, so what the tap takes next ran on the new stage.
        let untrimmed = config.replace(r#"fields = ["title"]"#, r#"fields = ["body"]"#);
        assert_ne!(untrimmed, config);
        let (status, answer) = put(ACME, &untrimmed);
        assert_eq!(status, 200, "{isolation}: {answer}");
        assert_eq!(answer["outcome"], "applied", "{isolation}: {answer}");
        assert_eq!(answer["generation"], 2, "{isolation}: {answer}");
        assert_eq!(
            answer["switched"], answer["workers"],
            "{isolation}: {answer}"
        );
        assert_eq!(
            title(ACME),
            "  a title  ",
            "{isolation}: the new stage runs"
        );

        // Refused, the run going on as it was: an invalid config (every
        // problem), one that needs a new run, a plugin the tenant may not
        // use, another tenant's try, a run that is not there.
        let (status, answer) = put(
            ACME,
            &untrimmed.replace("trim_whitespace.wasm", "absent.wasm"),
        );
        assert!(
            status == 400 || status == 403,
            "{isolation}: {status} {answer}"
        );
        assert!(answer.to_string().contains("absent.wasm"), "{answer}");
        let (status, answer) = put(
            ACME,
            &untrimmed.replace("batch_size = 50", "batch_size = 7"),
        );
        assert_eq!(status, 409, "{isolation}: {answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap_or_default()
                .contains("indexer"),
            "{answer}"
        );
        let (status, answer) = put(
            ACME,
            &untrimmed.replace("nop_indexer.wasm", "hostile_stage.wasm"),
        );
        assert!(
            status == 403 || status == 409,
            "{isolation}: {status} {answer}"
        );
        assert_eq!(put(ZETA, &untrimmed).0, 404, "{isolation}: not zeta's run");
        assert_eq!(
            serve
                .call("PUT", "/api/runs/nope/config", Some(ACME), &untrimmed)
                .0,
            404
        );
        assert_eq!(
            title(ACME),
            "  a title  ",
            "{isolation}: still the new stage"
        );

        // Reloading with its own config again changes nothing; the config
        // taken up is the one kept.
        let (status, answer) =
            serve.call("POST", &format!("/api/runs/{id}/reload"), Some(ACME), "");
        assert_eq!(status, 200, "{isolation}: {answer}");
        assert_eq!(answer["outcome"], "unchanged", "{isolation}: {answer}");
        // SIGHUP does the same for every live run.
        hang_up(&serve.proc);
        assert!(
            serve
                .proc
                .wait_for_log(&serve.log, "run reloaded", 2, Duration::from_secs(60)),
            "{isolation}: SIGHUP reloads the runs:\n{}",
            std::fs::read_to_string(&serve.log).unwrap_or_default()
        );
        let (status, _) = serve.call("POST", &format!("/api/runs/{id}/stop"), Some(ACME), "");
        assert_eq!(status, 200);
        serve.ended(ACME, &id);
        let (status, answer) = serve.call(
            "PUT",
            &format!("/api/runs/{id}/config"),
            Some(ACME),
            &untrimmed,
        );
        assert_eq!(status, 409, "{isolation}: an ended run: {answer}");
    }
}
