//! A tenant reloads its live run in `weir serve`; bad changes are refused.

use std::time::Duration;

use serde_json::Value;

use crate::operations::{ACME, Serve, ZETA, generated};

use super::hang_up;

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
            // The document's line, then the line that ends the tap.
            let first = line.as_str().and_then(|text| text.lines().next());
            let first: Value = serde_json::from_str(first.expect("a line")).expect("JSON");
            first["document"]["title"].clone()
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
