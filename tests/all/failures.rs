//! What becomes of documents that fail in local mode: stage calls retried
//! with backoff, dead letters kept in a file, and `weir replay` of them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use weir::run::{DeadLetter, RunResult, RunStatus, Runner, read_dead_letters};
use weir::testing::recording::{Recording, RecordingMessengers};
use weir_tests::{config, runtime};

/// `docs` (a TOML array) through the hostile stage into the test indexer,
/// with `worker` settings; the config lives in `dir`.
fn toml(docs: &str, worker: &str, indexer: &str) -> String {
    format!(
        r#"
        [worker]
        threads = 2
        retry_backoff = "40ms"
        {worker}
        [indexer]
        batch_timeout = "10ms"
        plugin = {{ path = @test-indexer, config = {indexer} }}
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ docs = {docs} }} }}
        [[pipelines]]
        name = "p"
        stages = [{{ name = "hostile", plugin = {{ path = @hostile-stage }} }}]
        "#
    )
}

fn run_in(dir: &Path, toml: &str) -> (RunResult, Arc<Recording>) {
    let messengers = RecordingMessengers::new(16);
    let recording = messengers.recording();
    let result = Runner::new(config(toml, dir), runtime(), Arc::new(messengers))
        .run()
        .unwrap_or_else(|e| panic!("config should be valid: {e}"));
    (result, recording)
}

fn dead_letters(dir: &Path, result: &RunResult) -> Vec<DeadLetter> {
    let path = dir
        .join("dead-letters")
        .join(format!("{}.jsonl", result.run_id));
    if path.exists() {
        read_dead_letters(&path).expect("dead letters")
    } else {
        Vec::new()
    }
}

#[test]
fn a_stage_failing_for_now_is_called_again_and_its_document_indexed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (result, _) = run_in(
        dir.path(),
        &toml(
            r#"[{ id = "t", action = "transient", count = "2" }, { id = "ok", action = "ok" }]"#,
            "",
            "{}",
        ),
    );
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(result.connectors[0].succeeded, 2);
    let stage = &result.stages[0];
    assert_eq!((stage.documents, stage.failed, stage.retries), (2, 0, 2));
    assert!(dead_letters(dir.path(), &result).is_empty());
}

#[test]
fn a_stage_that_keeps_failing_for_now_dead_letters_its_document_after_backoff() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (result, recording) = run_in(
        dir.path(),
        &toml(
            r#"[{ id = "t", action = "transient", n = 1 }, { id = "ok", action = "ok" }]"#,
            "max_retries = 3",
            "{}",
        ),
    );
    assert_eq!(result.status(), RunStatus::PartialSuccess);
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (1, 1)
    );
    let (_, failure) = recording.failed().into_iter().next().expect("failure");
    assert_eq!(failure.attempts, 4);
    assert!(failure.message.contains("after 4 attempts"), "{failure:?}");
    // Three backoffs of at least half of 40, 80 and 160 ms (jitter).
    let stage = &result.stages[0];
    assert!(
        stage.time >= Duration::from_millis(140),
        "the retries waited: {:?}",
        stage.time
    );
    // The dead letter: the document whole, why, where, how often, when.
    let letters = dead_letters(dir.path(), &result);
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(
        (
            letter.id.as_str(),
            letter.pipeline.as_str(),
            letter.plugin.as_str(),
            letter.attempts
        ),
        ("t", "p", "hostile", 4)
    );
    assert_eq!(letter.run_id.as_deref(), Some(result.run_id.as_str()));
    assert!(letter.error.contains("service unavailable"), "{letter:?}");
    assert_eq!(letter.document["n"], 1);
    assert!(!letter.failed_at.is_empty());
}

#[test]
fn traps_are_retried_only_where_configured() {
    let docs = r#"[{ id = "p", action = "panic_once" }]"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let (result, _) = run_in(dir.path(), &toml(docs, "", "{}"));
    assert_eq!(result.connectors[0].failed, 1, "a panic fails the document");
    let (result, _) = run_in(dir.path(), &toml(docs, "retry_traps = true", "{}"));
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(result.stages[0].retries, 1);
}

#[test]
fn documents_an_indexer_refuses_are_dead_lettered_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (result, _) = run_in(
        dir.path(),
        &toml(
            r#"[{ id = "a", action = "ok" }, { id = "b", action = "ok" }]"#,
            "",
            r#"{ fail_ids = ["b"] }"#,
        ),
    );
    let letters = dead_letters(dir.path(), &result);
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].id.as_str(), letters[0].plugin.as_str()),
        ("b", "indexer")
    );
    assert!(letters[0].error.contains("status 400"), "{:?}", letters[0]);
    assert_eq!(
        letters[0].document["processed"], true,
        "as the stages left it"
    );
}

#[test]
fn dead_letters_can_be_turned_off_or_moved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = r#"[{ id = "f", action = "fail" }]"#;
    let off = format!("[dead_letters]\nenabled = false\n{}", toml(docs, "", "{}"));
    let (result, _) = run_in(dir.path(), &off);
    assert_eq!(result.connectors[0].failed, 1);
    assert!(!dir.path().join("dead-letters").exists());
    let moved = format!(
        "[dead_letters]\npath = \"failed/all.jsonl\"\n{}",
        toml(docs, "", "{}")
    );
    run_in(dir.path(), &moved);
    run_in(dir.path(), &moved);
    let letters = read_dead_letters(&dir.path().join("failed/all.jsonl")).expect("read");
    assert_eq!(letters.len(), 2, "a fixed path collects every run's");
}

#[test]
fn replayed_dead_letters_are_indexed_and_counted_as_the_new_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = r#"[{ id = "a", action = "ok" }, { id = "b", action = "ok" }]"#;
    let (first, _) = run_in(dir.path(), &toml(docs, "", r#"{ fail_ids = ["b"] }"#));
    let letters = dead_letters(dir.path(), &first);
    assert_eq!(letters.len(), 1);
    // The backend takes `b` now.
    let fixed = toml(docs, "", "{}");
    let runner = Runner::new(
        config(&fixed, dir.path()),
        runtime(),
        Arc::new(RecordingMessengers::new(16)),
    );
    let plugins = runner.validate().expect("valid");
    let result = runner
        .replay(&plugins, "replay-run", letters, None)
        .expect("replay");
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let c = &result.connectors[0];
    assert_eq!(
        (c.name.as_str(), c.published, c.succeeded),
        ("replay:p", 1, 1)
    );
}

#[test]
fn dead_letters_go_to_an_indexer_plugin_when_one_is_configured() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).expect("out");
    let sink = format!(
        "[dead_letters]\nplugin = {{ path = @jsonl-indexer, config = {{ path = \"/out/letters.jsonl\" }}, grants = {{ dirs = [{{ host = {:?}, guest = \"/out\", writable = true }}] }} }}\n",
        out.display().to_string()
    );
    let docs = r#"[{ id = "f", action = "fail", n = 3 }, { id = "ok", action = "ok" }]"#;
    let (result, _) = run_in(dir.path(), &format!("{sink}{}", toml(docs, "", "{}")));
    assert_eq!(result.connectors[0].failed, 1);
    assert!(
        dead_letters(dir.path(), &result).is_empty(),
        "not in the file"
    );
    let text = std::fs::read_to_string(out.join("letters.jsonl")).expect("letters");
    let letters: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(letters.len(), 1, "{text}");
    let letter = &letters[0];
    assert_eq!(
        (letter["id"].as_str(), letter["plugin"].as_str()),
        (Some("f"), Some("hostile"))
    );
    assert_eq!(letter["document"]["n"], 3);
    assert!(
        letter["error"]
            .as_str()
            .is_some_and(|e| e.contains("asked to fail")),
        "{letter}"
    );
}

/// Text a plugin controls reaches the host's log in its own lines and in
/// the host's fields (here a guest panic's message quoting a document's id:
/// the guest's stderr lines, then the trap's cause and the document's
/// failure): a line break in it cannot forge a line of its own, nor a bidi
/// override or zero-width character reorder or hide what a line shows;
/// each is written as its escape.
#[test]
fn text_from_a_plugin_cannot_forge_or_hide_a_line_of_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("run.toml");
    // TOML escapes: the id holds a newline, U+202E, U+2066 and U+200B.
    let id =
        r#"d\n2030-01-01T00:00:00Z ERROR weir: forged \u202Etxt.exe \u2066x\u2069 zero\u200Bwidth"#;
    std::fs::write(
        &config,
        weir_tests::with_plugins(&toml(
            &format!(r#"[{{ id = "{id}", action = "panic" }}]"#),
            "max_retries = 0",
            "{}",
        )),
    )
    .expect("config");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir-under-test"))
        .args(["run", "--no-progress", config.to_str().expect("utf-8")])
        .output()
        .expect("weir run");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("hostile panic on d"), "{log}");
    assert!(
        !log.lines().any(|l| l.starts_with("2030-01-01")),
        "a forged line:\n{log}"
    );
    for c in ['\u{202E}', '\u{2066}', '\u{2069}', '\u{200B}'] {
        assert!(!log.contains(c), "{c:?} unescaped:\n{log}");
    }
    assert!(log.contains("\\u{202e}txt.exe"), "{log}");
}
