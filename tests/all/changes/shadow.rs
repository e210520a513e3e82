//! Shadow stages: where a shadow differs is reported, and nothing of it
//! reaches the index.

use weir_tests::plugin;

use super::{lines, slow_run, weir};

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
