//! The conformance suite: the same stage, connector and indexer written in
//! Rust, Python and JavaScript with each language's SDK
//! (`plugins/conformance/`) produce identical documents, events and
//! failures on the shared input, and match the expected output checked in
//! beside it. `WEIR_BLESS=1` rewrites the expected files from the Rust
//! plugins' output (review the diff before committing it).
//!
//! Python and JavaScript stages run three ways: the per-document API
//! (`process`) built as a batch stage (how the SDKs build stages) and as a
//! document stage (the `stage` world, one call per document), and the batch
//! API (`process_batch`, `batch-stage/`), in batches of [`BATCH`].

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use weir::testing::{PluginTest, TestError, Transcript, read_documents, read_jsonl};
use weir_tests::{plugin, repo_root, runtime, sdk_component};

pub(crate) const LANGS: [&str; 3] = ["rust", "python", "js"];

/// Documents per batch stage call: the input's six documents make a batch
/// with failures beside successes, then a shorter one.
const BATCH: usize = 4;

fn conformance_dir() -> PathBuf {
    repo_root().join("plugins").join("conformance")
}

/// The conformance plugin of `kind` in `lang`, built if needed.
pub(crate) fn component(lang: &str, kind: &str) -> PathBuf {
    match lang {
        "rust" => plugin(&format!("conformance-{kind}")),
        _ => sdk_component(lang, kind, &conformance_dir().join(lang).join(kind)),
    }
}

/// The conformance stages of `lang`, each named by how it runs.
fn stages(lang: &str) -> Vec<(&'static str, PathBuf)> {
    if lang == "rust" {
        return vec![("stage", component(lang, "stage"))];
    }
    let dir = conformance_dir().join(lang);
    vec![
        ("process, batched", component(lang, "stage")),
        (
            "process, per document",
            sdk_component(lang, "per-document-stage", &dir.join("stage")),
        ),
        (
            "process_batch",
            sdk_component(lang, "stage", &dir.join("batch-stage")),
        ),
    ]
}

fn input() -> Vec<weir::core::document::Document> {
    read_documents(&conformance_dir().join("inputs").join("documents.jsonl")).expect("input")
}

/// Compare `transcript` of `lang` with the expected file `name`; with
/// `WEIR_BLESS` set, the Rust transcript becomes the expected file.
fn check(lang: &str, name: &str, transcript: &Transcript, problems: &mut Vec<String>) {
    let path = conformance_dir()
        .join("expected")
        .join(format!("{name}.jsonl"));
    if lang == "rust" && std::env::var_os("WEIR_BLESS").is_some() {
        std::fs::write(&path, transcript.to_jsonl()).expect("bless");
    }
    let expected = read_jsonl(&path).expect("expected output");
    if let Err(mismatch) = transcript.expect(&expected) {
        problems.push(format!("{lang}, {name}:\n{mismatch}"));
    }
}

fn stage_cases() -> Vec<(&'static str, Value)> {
    let copy = |from: &str| json!({ "op": "copy", "from": from, "to": format!("{from}_copy") });
    vec![
        ("copy-title", copy("title")),
        ("copy-negative", copy("v")),
        ("copy-big", copy("big")),
        ("copy-decimal", copy("dec")),
        ("copy-float", copy("f")),
        ("copy-negative-float", copy("neg_f")),
        ("copy-exponent", copy("exp")),
        ("copy-unicode", copy("u")),
        ("copy-nested", copy("nested")),
        ("copy-null", copy("nul")),
        ("copy-multi", copy("multi")),
        (
            "rename",
            json!({ "op": "rename", "from": "title", "to": "name" }),
        ),
        (
            "split",
            json!({ "op": "split", "field": "tags", "separator": ";" }),
        ),
        ("children", json!({ "op": "children", "field": "items" })),
        (
            "drop",
            json!({ "op": "drop", "field": "status", "equals": "withdrawn" }),
        ),
        ("fail", json!({ "op": "fail" })),
    ]
}

/// The Rust conformance stage as built for contract 0.2.0: a per-document
/// stage (`stage-api`), which the host still runs beside batch stages.
fn rust_stage_0_2_0() -> PathBuf {
    repo_root().join("tests/fixtures/contract-0.2.0/conformance_stage.wasm")
}

#[test]
fn stages_do_the_same_in_every_language() {
    let mut problems = Vec::new();
    for lang in LANGS {
        for (how, path) in stages(lang) {
            let loaded = runtime()
                .load_stage(how, &weir::plugin::PluginSpec::new(&path, json!({})))
                .expect("load");
            if lang != "rust" {
                let batch = how != "process, per document";
                assert_eq!(loaded.is_batch(), batch, "{lang} stage ({how})");
            }
            for (name, config) in stage_cases() {
                let transcript = PluginTest::with_runtime(runtime(), &path)
                    .config(config)
                    .batch_size(BATCH)
                    .run(input())
                    .unwrap_or_else(|e| panic!("{lang} stage ({how}), {name}: {e}"));
                check(lang, &format!("stage-{name}"), &transcript, &mut problems);
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Both stage interfaces in Rust: the batch stage (this SDK) in batches of
/// one, of a few and of every document, and the per-document stage of
/// contract 0.2.0, all match the expected output.
#[test]
fn the_rust_stage_does_the_same_through_both_interfaces_and_any_batch() {
    let batch = component("rust", "stage");
    let per_document = rust_stage_0_2_0();
    let is_batch = |path: &Path| {
        runtime()
            .load_stage(
                "s",
                &weir::plugin::PluginSpec::new(path, json!({ "op": "fail" })),
            )
            .expect("load")
            .is_batch()
    };
    assert!(is_batch(&batch), "the Rust stage exports stage-batch-api");
    assert!(
        !is_batch(&per_document),
        "the 0.2.0 build exports stage-api"
    );
    let mut problems = Vec::new();
    let runs = [
        (&batch, 1),
        (&batch, 4),
        (&batch, 100),
        (&per_document, 100),
    ];
    for (path, size) in runs {
        let which = format!("{} in batches of {size}", path.display());
        for (name, config) in stage_cases() {
            let transcript = PluginTest::with_runtime(runtime(), path)
                .config(config)
                .batch_size(size)
                .run(input())
                .unwrap_or_else(|e| panic!("{which}, {name}: {e}"));
            check(&which, &format!("stage-{name}"), &transcript, &mut problems);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn connectors_publish_the_same_in_every_language() {
    let mut problems = Vec::new();
    for lang in LANGS {
        let transcript = PluginTest::with_runtime(runtime(), component(lang, "connector"))
            .config(json!({ "count": 3, "prefix": "gen" }))
            .run(Vec::new())
            .unwrap_or_else(|e| panic!("{lang} connector: {e}"));
        check(lang, "connector", &transcript, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The connector again through each SDK's packed publishing (`publish-packed`,
/// 256 documents a call): what it publishes is what it publishes one by one,
/// across calls, and a document the host refuses mid-call stops it there
/// with an error naming the document, those before it published.
#[test]
fn connectors_publish_the_same_packed_in_every_language() {
    let mut problems = Vec::new();
    let run = |lang: &str, config: Value| {
        PluginTest::with_runtime(runtime(), component(lang, "connector"))
            .config(config)
            .run(Vec::new())
            .unwrap_or_else(|e| panic!("{lang} connector: {e}"))
    };
    for lang in LANGS {
        let packed = run(lang, json!({ "count": 3, "prefix": "gen", "packed": true }));
        check(lang, "connector", &packed, &mut problems);

        let one_by_one = run(lang, json!({ "count": 600, "prefix": "gen" }));
        let packed = run(
            lang,
            json!({ "count": 600, "prefix": "gen", "packed": true }),
        );
        assert_eq!(one_by_one.documents().count(), 600, "{lang}");
        assert_eq!(packed.0, one_by_one.0, "{lang}: packed against one by one");

        let stopped = run(
            lang,
            json!({ "count": 600, "prefix": "gen", "packed": true, "deep_at": 300 }),
        );
        let (ids, errors) = ids_and_errors(&stopped);
        let before: Vec<String> = (0..300).map(|i| format!("gen-{i}")).collect();
        assert_eq!(ids, before, "{lang}: the documents before the refused one");
        let message = errors
            .first()
            .and_then(|e| e["message"].as_str())
            .unwrap_or_default();
        assert!(
            errors.len() == 1
                && errors[0]["call"] == "execute"
                && message.contains("document `gen-300`")
                && message.contains("max_depth"),
            "{lang}: {errors:?}"
        );

        // The connector itself fails mid-call: what it gathered before is published.
        let failed = run(
            lang,
            json!({ "count": 600, "prefix": "gen", "packed": true, "fail_at": 300 }),
        );
        let (ids, errors) = ids_and_errors(&failed);
        assert_eq!(ids, before, "{lang}: the documents before the failure");
        assert!(
            errors.len() == 1
                && errors[0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("configured to fail at gen-300")),
            "{lang}: {errors:?}"
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The ids of the documents a connector's transcript holds, in order, and
/// its ERROR events.
fn ids_and_errors(transcript: &Transcript) -> (Vec<&str>, Vec<&Value>) {
    let ids = transcript
        .documents()
        .filter_map(|d| d["id"].as_str())
        .collect();
    let errors = transcript
        .0
        .iter()
        .filter(|line| line["event"] == "ERROR")
        .collect();
    (ids, errors)
}

#[test]
fn indexers_write_and_refuse_the_same_in_every_language() {
    let mut problems = Vec::new();
    for lang in LANGS {
        let out = tempfile::tempdir().expect("tempdir");
        let transcript = PluginTest::with_runtime(runtime(), component(lang, "indexer"))
            .config(json!({ "path": "/out/indexed.jsonl" }))
            .grant_dir(out.path(), "/out", true)
            .batch_size(4)
            .run(input())
            .unwrap_or_else(|e| panic!("{lang} indexer: {e}"));
        check(lang, "indexer", &transcript, &mut problems);
        // What the backend received: the host's JSON, line for line.
        let written = read_jsonl(&out.path().join("indexed.jsonl")).expect("indexed file");
        check(lang, "indexer-file", &Transcript(written), &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every language names the offending setting, and reports all at once.
#[test]
fn config_problems_name_the_setting_in_every_language() {
    let cases = [
        (json!({ "op": "explode" }), "op"),
        (json!({ "op": "copy", "to": "x" }), "from"),
        (
            json!({ "op": "drop", "field": "a", "equals": "b", "colour": 1 }),
            "colour",
        ),
        (
            json!({ "op": "split", "field": 3, "separator": ";" }),
            "field",
        ),
    ];
    for lang in LANGS {
        for (how, path) in stages(lang) {
            for (config, setting) in &cases {
                match PluginTest::with_runtime(runtime(), &path)
                    .config(config.clone())
                    .run(input())
                {
                    Err(TestError::Config { issues }) => assert!(
                        issues
                            .iter()
                            .any(|i| i.path.contains(setting) || i.message.contains(setting)),
                        "{lang} ({how}): {config} reported {issues:?}, naming no `{setting}`"
                    ),
                    other => panic!("{lang} ({how}): {config} was accepted: {other:?}"),
                }
            }
        }
    }
}

/// A plugin built for a contract this host does not run is refused by name.
#[test]
fn a_component_of_another_contract_version_is_refused_with_the_versions_supported() {
    let old = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/contract-0.1.0-stage.wasm");
    let err = runtime()
        .load_stage("old", &weir::plugin::PluginSpec::new(&old, json!({})))
        .expect_err("a 0.1.0 component loads");
    let message = err.to_string();
    assert!(
        message.contains("weir:plugin@0.1.0") && message.contains("weir:plugin@0.2.0"),
        "{message}"
    );
}

/// Plugins of the three languages in one local run: a Python connector, a
/// JavaScript stage, a Rust stage and a Python indexer, two worker threads
/// (an instance of each stage per thread).
#[test]
fn a_pipeline_mixing_the_three_languages_runs_end_to_end() {
    let out = tempfile::tempdir().expect("tempdir");
    let toml = format!(
        r#"
        [worker]
        threads = 2
        [[connectors]]
        name = "gen"
        pipeline = "p"
        plugin = {{ path = {connector:?}, config = {{ count = 40 }} }}
        [[pipelines]]
        name = "p"
        [[pipelines.stages]]
        name = "copy-js"
        plugin = {{ path = {js_stage:?}, config = {{ op = "copy", from = "big", to = "big_copy" }} }}
        [[pipelines.stages]]
        name = "split-rust"
        plugin = {{ path = {rust_stage:?}, config = {{ op = "split", field = "text", separator = "-" }} }}
        [pipelines.indexer]
        batch_size = 7
        batch_timeout = "20ms"
        plugin = {{ path = {indexer:?}, config = {{ path = "/out/docs.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        "#,
        connector = component("python", "connector"),
        js_stage = component("js", "stage"),
        rust_stage = component("rust", "stage"),
        indexer = component("python", "indexer"),
        out = out.path(),
    );
    let result = weir::run::Runner::new(
        weir_tests::config(&toml, out.path()),
        runtime(),
        std::sync::Arc::new(weir::messenger::LocalMessengers {
            capacity: 100,
            max_bytes: 64 << 20,
        }),
    )
    .run()
    .expect("valid config");
    assert_eq!(result.status(), weir::run::RunStatus::Success, "{result:?}");
    let lines = read_jsonl(&out.path().join("docs.jsonl")).expect("indexed");
    assert_eq!(lines.len(), 40);
    for line in &lines {
        let n = line["n"].as_u64().expect("n");
        let big: Value =
            serde_json::from_str(&(18_446_744_073_709_551_616_u128 + u128::from(n)).to_string())
                .expect("number");
        assert!(
            weir::core::document::same_json(&line["big_copy"], &big),
            "{line}"
        );
        assert_eq!(line["text"], json!(["ünï", "😀", n.to_string()]), "{line}");
    }
}
