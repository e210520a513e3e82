//! Hostile guests: each misbehaviour fails its document with an error naming
//! the plugin and the cause, and the next document is processed normally by a
//! fresh instance.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use weir::plugin::{DirGrant, PluginError, PluginSpec, StageInstance, TrapCause};
use weir_tests::{doc, runtime, spec};

fn hostile(configure: impl FnOnce(&mut PluginSpec)) -> StageInstance {
    let mut spec = spec("hostile-stage", json!({}));
    spec.limits.call_timeout = Some(Duration::from_secs(5));
    configure(&mut spec);
    runtime()
        .load_stage("hostile", &spec)
        .expect("load")
        .instantiate()
        .expect("instantiate")
}

fn process(
    instance: &mut StageInstance,
    input: Value,
) -> Result<weir::document::Document, PluginError> {
    let mut d = doc(input);
    instance.process(&mut d).map(|_| d)
}

/// The next document goes through a working instance.
fn assert_recovers(instance: &mut StageInstance) {
    let d = process(instance, json!({ "id": "next", "action": "ok" })).expect("next document");
    assert_eq!(d.get("processed"), Some(&json!(true)));
}

fn expect_trap(result: Result<weir::document::Document, PluginError>) -> TrapCause {
    match result {
        Err(PluginError::Trap { plugin, cause }) => {
            assert_eq!(plugin, "hostile");
            cause
        }
        other => panic!("expected a trap, got {other:?}"),
    }
}

fn expect_document_error(result: Result<weir::document::Document, PluginError>) -> String {
    match result {
        Err(e @ PluginError::Document { .. }) => {
            assert_eq!(e.plugin(), "hostile");
            e.to_string()
        }
        other => panic!("expected a document error, got {other:?}"),
    }
}

#[test]
fn an_infinite_loop_is_stopped_by_the_deadline() {
    let mut instance = hostile(|s| s.limits.call_timeout = Some(Duration::from_millis(200)));
    let err =
        process(&mut instance, json!({ "id": "d1", "action": "loop" })).expect_err("must trap");
    assert!(
        err.to_string()
            .contains("plugin `hostile` exceeded its call deadline of 200ms"),
        "{err}"
    );
    assert!(matches!(expect_trap(Err(err)), TrapCause::Deadline(_)));
    assert_recovers(&mut instance);
    assert_eq!(instance.restarts(), 1);
}

#[test]
fn growing_memory_past_the_cap_traps() {
    let mut instance = hostile(|s| s.limits.memory_mib = Some(32));
    let err =
        process(&mut instance, json!({ "id": "d1", "action": "alloc" })).expect_err("must trap");
    assert!(
        err.to_string()
            .contains("exceeded its memory limit of 32 MiB"),
        "{err}"
    );
    match expect_trap(Err(err)) {
        TrapCause::MemoryLimit {
            limit_mib,
            wanted_bytes,
        } => {
            assert_eq!(limit_mib, 32);
            assert!(wanted_bytes > 32 << 20);
        }
        other => panic!("expected a memory limit, got {other:?}"),
    }
    assert_recovers(&mut instance);
}

#[test]
fn a_panic_is_reported_with_its_message() {
    let mut instance = hostile(|_| {});
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "d1", "action": "panic" }),
    ));
    match cause {
        TrapCause::Panic(message) => assert!(message.contains("hostile panic on d1"), "{message}"),
        other => panic!("expected a panic, got {other:?}"),
    }
    assert_recovers(&mut instance);
}

#[test]
fn unbounded_recursion_traps() {
    let mut instance = hostile(|_| {});
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "d1", "action": "recurse" }),
    ));
    assert_eq!(cause, TrapCause::Other("stack overflow".into()));
    assert_recovers(&mut instance);
}

#[test]
fn document_and_fatal_errors_are_told_apart() {
    let mut instance = hostile(|_| {});
    let err = process(&mut instance, json!({ "id": "d1", "action": "fail" })).expect_err("fails");
    assert!(err.is_document_error());
    let err = process(&mut instance, json!({ "id": "d2", "action": "fatal" })).expect_err("fails");
    assert!(matches!(err, PluginError::Fatal { .. }), "{err}");
    assert!(!err.is_document_error());
    assert_recovers(&mut instance);
    assert_eq!(
        instance.restarts(),
        0,
        "guest errors do not replace the instance"
    );
}

#[test]
fn a_stage_that_fails_to_start_is_refused_before_any_document() {
    let plugin = runtime()
        .load_stage(
            "hostile",
            &spec("hostile-stage", json!({ "fail_start": true })),
        )
        .expect("load");
    let err = plugin.instantiate().expect_err("start fails");
    assert!(matches!(err, PluginError::Fatal { .. }), "{err}");
    assert!(
        err.to_string().contains("configured to fail at start"),
        "{err}"
    );
}

#[test]
fn files_outside_granted_directories_cannot_be_read() {
    let granted = tempfile::tempdir().expect("tempdir");
    std::fs::write(granted.path().join("ok.txt"), "granted content").expect("write");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.txt"), "secret").expect("write");
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        granted.path().join("link.txt"),
    )
    .expect("symlink");

    let mut none = hostile(|_| {});
    let err = expect_document_error(process(
        &mut none,
        json!({ "id": "d", "action": "read", "path": "/etc/passwd" }),
    ));
    assert!(err.contains("cannot read /etc/passwd"), "{err}");

    let mut instance = hostile(|s| {
        s.grants.dirs.push(DirGrant {
            host: granted.path().to_owned(),
            guest: "/data".into(),
            writable: false,
        });
    });
    let ok = process(
        &mut instance,
        json!({ "id": "d", "action": "read", "path": "/data/ok.txt" }),
    )
    .expect("granted read");
    assert_eq!(ok.get_string("content").as_deref(), Some("granted content"));

    let secret = outside.path().join("secret.txt");
    for path in [
        "/etc/passwd".to_owned(),
        "/data/../etc/passwd".to_owned(),
        format!("/data/../../../../..{}", secret.display()),
        secret.display().to_string(),
        "/data/link.txt".to_owned(),
    ] {
        let err = expect_document_error(process(
            &mut instance,
            json!({ "id": "d", "action": "read", "path": path }),
        ));
        assert!(
            !err.contains("secret") || err.contains("secret.txt"),
            "content leaked: {err}"
        );
    }
    let err = expect_document_error(process(
        &mut instance,
        json!({ "id": "d", "action": "write", "path": "/data/new.txt" }),
    ));
    assert!(err.contains("cannot write"), "{err}");
    assert!(
        !granted.path().join("new.txt").exists(),
        "a read-only grant must not allow writes"
    );
    assert_recovers(&mut instance);
}

#[test]
fn a_writable_grant_allows_writes_inside_it_only() {
    let granted = tempfile::tempdir().expect("tempdir");
    let mut instance = hostile(|s| {
        s.grants.dirs.push(DirGrant {
            host: granted.path().to_owned(),
            guest: "/out".into(),
            writable: true,
        });
    });
    process(
        &mut instance,
        json!({ "id": "w1", "action": "write", "path": "/out/new.txt" }),
    )
    .expect("write");
    assert_eq!(
        std::fs::read_to_string(granted.path().join("new.txt")).expect("read"),
        "w1"
    );
    expect_document_error(process(
        &mut instance,
        json!({ "id": "w2", "action": "write", "path": "/out/../escape.txt" }),
    ));
}

#[test]
fn environment_variables_are_visible_only_when_granted() {
    // SAFETY: tests in this binary do not read this variable concurrently.
    unsafe { std::env::set_var("WEIR_TEST_SECRET", "from-host") };
    let mut none = hostile(|_| {});
    expect_document_error(process(
        &mut none,
        json!({ "id": "d", "action": "env", "name": "WEIR_TEST_SECRET" }),
    ));
    expect_document_error(process(
        &mut none,
        json!({ "id": "d", "action": "env", "name": "PATH" }),
    ));

    let mut granted = hostile(|s| {
        s.grants.env.insert("INDEX".into(), "books".into());
    });
    let d = process(
        &mut granted,
        json!({ "id": "d", "action": "env", "name": "INDEX" }),
    )
    .expect("granted");
    assert_eq!(d.get_string("value").as_deref(), Some("books"));
    expect_document_error(process(
        &mut granted,
        json!({ "id": "d", "action": "env", "name": "WEIR_TEST_SECRET" }),
    ));
}

/// A one-route HTTP server on loopback that counts the connections it served.
fn http_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let served = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&served);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (port, served)
}

#[test]
fn http_reaches_only_allow_listed_hosts() {
    let (port, served) = http_server();
    let url = format!("http://127.0.0.1:{port}/ping");

    let mut none = hostile(|_| {});
    let err = expect_document_error(process(
        &mut none,
        json!({ "id": "d", "action": "http", "url": url }),
    ));
    assert!(err.contains("HttpRequestDenied"), "{err}");

    let mut instance = hostile(|s| s.grants.http.push(format!("127.0.0.1:{port}")));
    let d = process(
        &mut instance,
        json!({ "id": "d", "action": "http", "url": url }),
    )
    .expect("allowed");
    assert_eq!(d.get("status"), Some(&json!(200)));

    for denied in [
        format!("http://localhost:{port}/ping"),
        format!("http://127.0.0.1:{}/ping", port.wrapping_add(1)),
        "http://example.invalid/".to_owned(),
    ] {
        let err = expect_document_error(process(
            &mut instance,
            json!({ "id": "d", "action": "http", "url": denied }),
        ));
        assert!(err.contains("HttpRequestDenied"), "{denied}: {err}");
    }
    assert_eq!(
        served.load(Ordering::SeqCst),
        1,
        "denied requests must never reach the network"
    );
    assert_recovers(&mut instance);
}

#[test]
fn bad_plugin_files_and_wrong_kinds_are_clear_errors() {
    let rt = runtime();
    let missing = PluginSpec::new("/nonexistent/plugin.wasm", json!({}));
    let err = rt.load_stage("ghost", &missing).expect_err("missing file");
    assert!(matches!(err, PluginError::Load { .. }), "{err}");
    assert!(
        err.to_string().contains("ghost") && err.to_string().contains("/nonexistent/plugin.wasm"),
        "{err}"
    );

    let not_wasm = tempfile::NamedTempFile::new().expect("tempfile");
    std::fs::write(not_wasm.path(), b"not a component").expect("write");
    let err = rt
        .load_stage("junk", &PluginSpec::new(not_wasm.path(), json!({})))
        .expect_err("not wasm");
    assert!(matches!(err, PluginError::Load { .. }), "{err}");

    let err = rt
        .load_stage("connector-as-stage", &spec("file-connector", json!({})))
        .expect_err("wrong world");
    assert!(matches!(err, PluginError::Instantiate { .. }), "{err}");
    assert!(err.to_string().contains("stage-api"), "{err}");

    let mut bad_grant = spec("hostile-stage", json!({}));
    bad_grant.grants.http.push("http://x/".into());
    let err = rt.load_stage("hostile", &bad_grant).expect_err("bad grant");
    assert!(err.to_string().contains("grants.http"), "{err}");

    let mut missing_dir = spec("hostile-stage", json!({}));
    missing_dir.grants.dirs.push(DirGrant {
        host: "/nonexistent/dir".into(),
        guest: "/d".into(),
        writable: false,
    });
    let err = rt
        .load_stage("hostile", &missing_dir)
        .expect("load")
        .instantiate()
        .expect_err("missing dir");
    assert!(err.to_string().contains("/nonexistent/dir"), "{err}");
}

// ---- limits ----

#[test]
fn a_loop_just_under_the_deadline_finishes_and_just_over_is_stopped() {
    let mut instance = hostile(|s| s.limits.call_timeout = Some(Duration::from_millis(400)));
    let d = process(
        &mut instance,
        json!({ "id": "under", "action": "spin", "millis": "250" }),
    )
    .expect("250 ms of a 400 ms deadline finishes");
    assert_eq!(d.get("processed"), Some(&json!(true)));
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "over", "action": "spin", "millis": "600" }),
    ));
    assert_eq!(cause, TrapCause::Deadline(Duration::from_millis(400)));
    assert_recovers(&mut instance);
}

#[test]
fn a_million_children_stop_at_the_children_limit() {
    let mut instance = hostile(|_| {});
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "d", "action": "children", "count": "1000000" }),
    ));
    match &cause {
        TrapCause::Limit(message) => assert!(
            message.contains("more than 10000 documents")
                && message.contains("limits.max_children"),
            "{message}"
        ),
        other => panic!("expected the children limit, got {other:?}"),
    }
    assert_recovers(&mut instance);

    let mut five = hostile(|s| s.limits.max_children = Some(5));
    let children = {
        let mut d = doc(json!({ "id": "d", "action": "children", "count": "5" }));
        five.process(&mut d).expect("five children are allowed")
    };
    assert_eq!(children.len(), 5);
    let cause = expect_trap(process(
        &mut five,
        json!({ "id": "d", "action": "children", "count": "6" }),
    ));
    assert!(matches!(cause, TrapCause::Limit(_)), "{cause:?}");
}

#[test]
fn a_100_mib_field_and_a_document_grown_past_the_limit_are_refused() {
    let mut instance = hostile(|_| {});
    let err = expect_document_error(process(
        &mut instance,
        json!({ "id": "big", "action": "big_field", "mib": "100" }),
    ));
    assert!(
        err.contains("document `big` would grow to about")
            && err.contains("over the limit of 16 MiB (limits.max_document_mib)"),
        "{err}"
    );
    let err = expect_document_error(process(
        &mut instance,
        json!({ "id": "grown", "action": "grow", "count": "20" }),
    ));
    assert!(
        err.contains("document `grown` would grow to about")
            && err.contains("limits.max_document_mib"),
        "{err}"
    );
    assert_recovers(&mut instance);
    let mut roomy = hostile(|s| s.limits.max_document_mib = Some(32));
    process(
        &mut roomy,
        json!({ "id": "grown", "action": "grow", "count": "20" }),
    )
    .expect("20 MiB fits a 32 MiB limit");
}

#[test]
fn a_log_flood_is_cut_and_fails_its_document() {
    let mut instance = hostile(|s| s.limits.log_lines_per_second = Some(100));
    let err = expect_document_error(process(
        &mut instance,
        json!({ "id": "loud", "action": "log_flood", "count": "5000" }),
    ));
    assert!(
        err.contains("wrote 10000 log lines for one document")
            && err.contains("limit of 100 lines per second (limits.log_lines_per_second)")
            && err.contains("lines dropped"),
        "{err}"
    );
    assert_recovers(&mut instance);
    // A few lines are within the limit (of a full bucket).
    let mut quiet = hostile(|s| s.limits.log_lines_per_second = Some(100));
    let d = process(
        &mut quiet,
        json!({ "id": "quiet", "action": "log_flood", "count": "3" }),
    )
    .expect("a few lines are fine");
    assert_eq!(d.get("processed"), Some(&json!(true)));
    // Steady logging over the rate (2 lines a document, 150 documents at
    // once) loses lines, never documents.
    for i in 0..150 {
        process(
            &mut quiet,
            json!({ "id": format!("steady-{i}"), "action": "log_flood", "count": "1" }),
        )
        .expect("a line or two per document never fails it");
    }
}

/// An HTTP server on loopback that answers every request with a redirect to `location`.
fn redirecting_server(location: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let response = format!(
                "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    port
}

#[test]
fn a_redirect_to_a_host_not_allowed_is_denied() {
    let (target, served) = http_server();
    let redirect = redirecting_server(format!("http://127.0.0.1:{target}/secret"));
    let mut instance = hostile(|s| s.grants.http.push(format!("127.0.0.1:{redirect}")));
    let err = expect_document_error(process(
        &mut instance,
        json!({ "id": "d", "action": "http_follow", "url": format!("http://127.0.0.1:{redirect}/") }),
    ));
    assert!(
        err.contains("redirected") && err.contains("HttpRequestDenied"),
        "{err}"
    );
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "the redirect target was never reached"
    );
    assert_recovers(&mut instance);
}

#[test]
fn a_fresh_instance_per_document_keeps_nothing_between_documents() {
    let calls = |instance: &mut StageInstance| -> Vec<Value> {
        (0..3)
            .map(|i| {
                let d = process(
                    instance,
                    json!({ "id": format!("d{i}"), "action": "count" }),
                )
                .expect("count");
                d.get("calls").cloned().expect("calls")
            })
            .collect()
    };
    let mut reused = hostile(|_| {});
    assert_eq!(calls(&mut reused), [json!(1), json!(2), json!(3)]);
    let mut fresh = hostile(|s| s.instance = weir::plugin::InstancePolicy::Fresh);
    assert_eq!(calls(&mut fresh), [json!(1), json!(1), json!(1)]);
    assert_eq!(fresh.restarts(), 0, "a fresh instance is not a restart");
}

#[test]
fn a_pinned_digest_must_match() {
    let mut pinned = spec("noop-stage", json!({}));
    let bytes = std::fs::read(&pinned.path).expect("plugin file");
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    pinned.sha256 = Some(digest.to_uppercase());
    runtime()
        .load_stage("pinned", &pinned)
        .expect("the pinned digest matches (in any case)");
    pinned.sha256 = Some("0".repeat(64));
    let err = runtime()
        .load_stage("pinned", &pinned)
        .expect_err("a different digest is refused");
    let message = err.to_string();
    assert!(
        message.contains("pinned") && message.contains(&digest) && message.contains("refusing"),
        "{message}"
    );
}

#[test]
fn documents_kept_across_calls_and_values_adding_up_are_bounded() {
    let mut instance = hostile(|s| s.limits.max_children = Some(100));
    process(
        &mut instance,
        json!({ "id": "d1", "action": "hoard", "count": "60" }),
    )
    .expect("60 documents kept");
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "d2", "action": "hoard", "count": "60" }),
    ));
    assert!(
        matches!(&cause, TrapCause::Limit(m) if m.contains("limits.max_children")),
        "documents held from an earlier call count: {cause:?}"
    );
    assert_recovers(&mut instance);
}
