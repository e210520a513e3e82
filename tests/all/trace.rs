//! `weir trace <config> <id>` and `GET /api/runs/{id}/trace/{doc}`: what
//! became of one document, from the traces runs keep with `[trace]`.

use serde_json::Value;
use weir_tests::{repo_root, with_plugins};

use crate::changes::weir;
use crate::operations::{ACME, Serve, ZETA, generated};

/// The bundled example with a trace kept, in `dir`.
fn traced_example(dir: &std::path::Path) -> String {
    let examples = repo_root().join("examples");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("out");
    let text = crate::changes::example_text(&examples.join("local.toml"), &out);
    let path = dir.join("local.toml");
    let text = text.replace(
        "[runner]\n",
        &format!(
            "[runner]\ncache_dir = {:?}\n",
            dir.join("cache").display().to_string()
        ),
    );
    std::fs::write(&path, format!("[trace]\nenabled = true\n{text}")).expect("config");
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn weir_trace_tells_what_became_of_a_document_in_each_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = traced_example(dir.path());
    // Before any run: no trace yet, said plainly.
    let (code, out) = weir(&["trace", &config, "978-0486282114"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no run of this config has kept one yet"),
        "{out}"
    );
    for _ in 0..2 {
        let (code, out) = weir(&["run", "--no-progress", &config]);
        assert_eq!(code, 0, "{out}");
    }
    // Indexed, in both runs, with the stages' components named.
    let (code, out) = weir(&["trace", &config, "978-0486282114"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.matches("\nrun ").count() + usize::from(out.starts_with("run ")),
        2,
        "{out}"
    );
    assert_eq!(
        out.matches("  indexed [connector books, generation 1]")
            .count(),
        2,
        "{out}"
    );
    assert!(
        out.contains("config generation 1, pipeline books: trim "),
        "{out}"
    );
    assert!(!out.contains("pipeline authors"), "{out}");
    // Dropped by the stage that dropped it.
    let (code, out) = weir(&["trace", &config, "978-0141439600"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("dropped by stage withdrawn"), "{out}");
    // A parent names its children; a child, its parent and the stage.
    let (_, out) = weir(&["trace", &config, "978-0141439518"]);
    assert!(
        out.contains("made child pp-1813 in stage editions"),
        "{out}"
    );
    let (_, out) = weir(&["trace", &config, "pp-1813"]);
    assert!(
        out.contains("made by stage editions from 978-0141439518"),
        "{out}"
    );
    assert!(out.contains("indexed"), "{out}");
    // As JSON, each run's lines.
    let (code, out) = weir(&["trace", &config, "pp-1813", "--json"]);
    assert_eq!(code, 0, "{out}");
    let runs: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{out}");
    assert_eq!(runs[0]["lines"][0]["event"], "CREATE", "{out}");
    // An id no run published.
    let (code, out) = weir(&["trace", &config, "nobody"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no trace in"), "{out}");
}

#[test]
fn a_failed_document_is_traced_to_its_stage_and_dead_letter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("fail.toml");
    std::fs::write(
        &config,
        with_plugins(&format!(
            r#"
            [trace]
            enabled = true
            [runner]
            cache_dir = {cache:?}
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = {{ path = @test-connector, config = {{ docs = [{{ id = "x", action = "fail" }}], count = 1 }} }}
            [[pipelines]]
            name = "p"
            stages = [{{ name = "h", plugin = {{ path = @hostile-stage }} }}]
            [indexer]
            plugin = {{ path = @nop-indexer }}
            "#,
            cache = dir.path().join("cache").display().to_string(),
        )),
    )
    .expect("config");
    let config = config.to_str().expect("utf-8");
    let (code, out) = weir(&["run", "--no-progress", config]);
    assert_eq!(code, 3, "{out}");
    let (code, out) = weir(&["trace", config, "x"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("failed in stage h: "), "{out}");
    assert!(out.contains("asked to fail"), "{out}");
    assert!(out.contains("(its dead letter: "), "{out}");
    assert!(out.contains("dead-letters"), "{out}");
}

#[test]
fn a_tenant_reads_the_trace_of_its_own_runs_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(dir.path());
    let nop = r#"{ path = "nop_indexer.wasm" }"#;
    let config = format!(
        "{}\n[trace]\nenabled = true\n",
        generated("acme-books", 20, nop)
    );
    let (status, run) = serve.submit(ACME, &config);
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("run id").to_owned();
    serve.ended(ACME, &id);
    let (status, trace) = serve.call(
        "GET",
        &format!("/api/runs/{id}/trace/doc-3"),
        Some(ACME),
        "",
    );
    assert_eq!(status, 200, "{trace}");
    assert_eq!(trace["run"], id.as_str(), "{trace}");
    assert_eq!(trace["lines"][0]["event"], "FINISH", "{trace}");
    assert_eq!(
        trace["generations"][0]["pipelines"][0]["stages"][0]["name"],
        "trim"
    );
    // Another tenant cannot see the run, so cannot read its trace.
    let (status, _) = serve.call(
        "GET",
        &format!("/api/runs/{id}/trace/doc-3"),
        Some(ZETA),
        "",
    );
    assert_eq!(status, 404);
    // An id the run never had.
    let (status, _) = serve.call(
        "GET",
        &format!("/api/runs/{id}/trace/nobody"),
        Some(ACME),
        "",
    );
    assert_eq!(status, 404);
    // A config may not say where its trace goes: the server keeps it.
    let placed = format!("{config}path = \"/tmp/elsewhere\"\n");
    let (status, refused) = serve.submit(ACME, &placed);
    assert_eq!(status, 403, "{refused}");
    assert!(refused.to_string().contains("trace.path"), "{refused}");
}
