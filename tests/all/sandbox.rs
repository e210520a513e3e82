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
) -> Result<weir::core::document::Document, PluginError> {
    let mut d = doc(input);
    instance.process(&mut d).map(|_| d)
}

/// The next document goes through a working instance.
fn assert_recovers(instance: &mut StageInstance) {
    let d = process(instance, json!({ "id": "next", "action": "ok" })).expect("next document");
    assert_eq!(d.get("processed"), Some(&json!(true)));
}

fn expect_trap(result: Result<weir::core::document::Document, PluginError>) -> TrapCause {
    match result {
        Err(PluginError::Trap { plugin, cause }) => {
            assert_eq!(plugin, "hostile");
            cause
        }
        other => panic!("expected a trap, got {other:?}"),
    }
}

fn expect_document_error(result: Result<weir::core::document::Document, PluginError>) -> String {
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
fn a_huge_error_message_is_clipped_where_it_enters_the_host() {
    let mut instance = hostile(|_| {});
    let err = process(
        &mut instance,
        json!({ "id": "d1", "action": "huge_error", "mib": "16" }),
    )
    .expect_err("fails");
    let PluginError::Document { message, .. } = &err else {
        panic!("a document error: {err}");
    };
    assert!(message.len() <= 5 * 1024, "{} bytes kept", message.len());
    assert!(
        message.ends_with(&format!("({} bytes in all)", 16 << 20)),
        "the full size is said: {}",
        &message[message.len() - 40..]
    );
    assert_recovers(&mut instance);
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
        s.grants
            .dirs
            .push(DirGrant::new(granted.path().to_owned(), "/data", false));
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
        s.grants
            .dirs
            .push(DirGrant::new(granted.path().to_owned(), "/out", true));
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

/// A granted name reaches only public addresses, unless the address it
/// resolves to is granted too. `127.1` is a name to `wasi:http` (not an
/// address in the standard form), which the system resolver turns into
/// 127.0.0.1 (as an attacker's DNS name could): no `/etc/hosts` edits.
#[test]
fn a_granted_name_reaches_loopback_only_when_the_address_is_granted() {
    let (port, served) = http_server();
    let url = format!("http://127.1:{port}/ping");
    let mut name_only = hostile(|s| s.grants.http.push(format!("127.1:{port}")));
    let err = expect_document_error(process(
        &mut name_only,
        json!({ "id": "d", "action": "http", "url": url }),
    ));
    assert!(err.contains("DestinationIpProhibited"), "{err}");
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "refused before connecting"
    );

    let mut with_address = hostile(|s| {
        s.grants.http.push(format!("127.1:{port}"));
        s.grants.http.push(format!("127.0.0.1:{port}"));
    });
    let d = process(
        &mut with_address,
        json!({ "id": "d", "action": "http", "url": url }),
    )
    .expect("the address is granted");
    assert_eq!(d.get("status"), Some(&json!(200)));

    // `localhost` is loopback by definition: granting it grants loopback.
    let mut localhost = hostile(|s| s.grants.http.push(format!("localhost:{port}")));
    let d = process(
        &mut localhost,
        json!({ "id": "d", "action": "http", "url": format!("http://localhost:{port}/ping") }),
    )
    .expect("localhost is granted");
    assert_eq!(d.get("status"), Some(&json!(200)));
    assert_eq!(served.load(Ordering::SeqCst), 2);
    assert_recovers(&mut name_only);
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
    missing_dir
        .grants
        .dirs
        .push(DirGrant::new("/nonexistent/dir", "/d", false));
    // A grant is opened once, when its plugin is loaded.
    let err = rt
        .load_stage("hostile", &missing_dir)
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

// ---- the document layer's limits, whatever the plugin asks ----

#[test]
fn a_path_100000_levels_deep_fails_its_document_not_the_host() {
    let mut instance = hostile(|_| {});
    let err = expect_document_error(process(
        &mut instance,
        json!({ "id": "deep", "action": "deep_path", "depth": "100000" }),
    ));
    assert!(
        err.contains("levels deep") && err.contains("limits.max_depth"),
        "{err}"
    );
    let d = process(
        &mut instance,
        json!({ "id": "ok-depth", "action": "deep_path", "depth": "60" }),
    )
    .expect("60 levels are within the default 64");
    assert_eq!(d.depth(), 60);
    let mut shallow = hostile(|s| s.limits.max_depth = Some(8));
    process(
        &mut shallow,
        json!({ "id": "d", "action": "deep_path", "depth": "8" }),
    )
    .expect("8 levels of 8");
    expect_document_error(process(
        &mut shallow,
        json!({ "id": "d", "action": "deep_path", "depth": "9" }),
    ));
    assert_recovers(&mut instance);
}

#[test]
fn a_deep_chain_of_children_fails_its_document_not_the_host() {
    let mut instance = hostile(|_| {});
    let err = expect_document_error(process(
        &mut instance,
        json!({ "id": "chain", "action": "deep_children", "depth": "100000" }),
    ));
    assert!(err.contains("limits.max_depth"), "{err}");
    let d = process(
        &mut instance,
        json!({ "id": "short", "action": "deep_children", "depth": "10" }),
    )
    .expect("a short chain is fine");
    assert_eq!(d.children().len(), 1);
    assert_recovers(&mut instance);
}

#[test]
fn huge_array_indexes_are_refused_before_anything_is_allocated() {
    let mut instance = hostile(|_| {});
    for index in [
        u64::MAX.to_string(),
        (u64::MAX - 1).to_string(),
        "999999999".to_owned(),
        "18446744073709551616".to_owned(),
    ] {
        let err = expect_document_error(process(
            &mut instance,
            json!({ "id": "i", "action": "index", "index": index }),
        ));
        assert!(
            err.contains("limits.max_document_mib") || err.contains("non-negative integer"),
            "{index}: {err}"
        );
    }
    let d = process(
        &mut instance,
        json!({ "id": "i", "action": "index", "index": "1000" }),
    )
    .expect("a modest index pads with nulls");
    assert_eq!(d.get_all("a").count(), 1001);
    assert_recovers(&mut instance);
    assert_eq!(instance.restarts(), 0, "refusals are not traps");
}

#[test]
fn copies_of_children_count_toward_the_memory_limit() {
    let mut instance = hostile(|s| s.limits.memory_mib = Some(64));
    let big_child = json!({ "id": "c", "body": "b".repeat(1 << 20) });
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "p", "action": "copy_children", "count": "200", "_children": [big_child] }),
    ));
    assert!(
        matches!(&cause, TrapCause::Limit(m) if m.contains("memory limit of 64 MiB") && m.contains("documents held in the host")),
        "{cause:?}"
    );
    assert_recovers(&mut instance);
}

#[test]
fn documents_kept_across_calls_are_sized_not_only_counted() {
    let mut instance = hostile(|s| s.limits.memory_mib = Some(96));
    process(
        &mut instance,
        json!({ "id": "d1", "action": "hoard_big", "count": "4", "mib": "8" }),
    )
    .expect("32 MiB kept");
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "d2", "action": "hoard_big", "count": "8", "mib": "8" }),
    ));
    assert!(
        matches!(&cause, TrapCause::Limit(m) if m.contains("limits.memory_mib")),
        "what an earlier call kept counts: {cause:?}"
    );
    assert_recovers(&mut instance);
    process(
        &mut instance,
        json!({ "id": "d3", "action": "hoard_big", "count": "4", "mib": "8" }),
    )
    .expect("the replaced instance starts with nothing held");
}

#[test]
fn run_ids_are_the_hosts_to_set() {
    let mut instance = hostile(|_| {});
    let mut d = doc(json!({ "id": "p", "action": "spoof_run_id" }));
    d.set_run_id(Some("the-run".into()));
    let children = instance.process(&mut d).expect("process");
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].id(), "returned");
    assert_eq!(children[0].run_id(), Some("the-run"), "the parent's run");
    assert_eq!(d.run_id(), Some("the-run"));
    assert_eq!(d.children()[0].id(), "nested");
    assert_eq!(d.children()[0].run_id(), None, "no claim survives nesting");
}

// ---- time blocked in the host counts toward the deadline ----

#[test]
fn a_guest_sleeping_in_the_host_is_stopped_at_the_deadline() {
    let mut instance = hostile(|s| s.limits.call_timeout = Some(Duration::from_millis(300)));
    let started = std::time::Instant::now();
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "sleepy", "action": "sleep", "millis": "600000" }),
    ));
    assert_eq!(cause, TrapCause::Deadline(Duration::from_millis(300)));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped near its deadline, not after the sleep: {:?}",
        started.elapsed()
    );
    process(
        &mut instance,
        json!({ "id": "nap", "action": "sleep", "millis": "20" }),
    )
    .expect("a short sleep within the deadline is fine");
    assert_recovers(&mut instance);
}

/// A loopback server that accepts connections and never answers.
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

#[test]
fn a_slow_http_peer_does_not_hold_a_call_past_its_deadline() {
    let port = silent_server();
    let mut instance = hostile(|s| {
        s.limits.call_timeout = Some(Duration::from_millis(500));
        s.grants.http.push(format!("127.0.0.1:{port}"));
    });
    let started = std::time::Instant::now();
    let result = process(
        &mut instance,
        json!({ "id": "slow", "action": "http", "url": format!("http://127.0.0.1:{port}/") }),
    );
    // Either the call is interrupted, or the guest's HTTP wait was capped
    // by what was left of the deadline and it failed the document itself.
    match result {
        Err(PluginError::Trap { cause, .. }) => {
            assert_eq!(cause, TrapCause::Deadline(Duration::from_millis(500)));
        }
        Err(e @ PluginError::Document { .. }) => {
            assert!(e.to_string().contains("GET"), "{e}");
        }
        other => panic!("expected the slow request to fail, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_recovers(&mut instance);
}

#[test]
fn check_config_start_and_stop_have_deadlines_too() {
    let quick = |config: Value| {
        let mut s = spec("hostile-stage", config);
        s.limits.call_timeout = Some(Duration::from_millis(300));
        runtime().load_stage("hostile", &s).expect("load")
    };
    let started = std::time::Instant::now();
    let err = quick(json!({ "check_sleep_ms": 600000 }))
        .check_config()
        .expect_err("check-config sleeps past its deadline");
    assert!(err.to_string().contains("call deadline"), "{err}");
    let err = quick(json!({ "start_sleep_ms": 600000 }))
        .instantiate()
        .expect_err("start sleeps past its deadline");
    assert!(err.to_string().contains("call deadline"), "{err}");
    let mut stopping = quick(json!({ "stop_sleep_ms": 600000 }))
        .instantiate()
        .expect("starts");
    let err = stopping.stop().expect_err("stop sleeps past its deadline");
    assert!(err.to_string().contains("call deadline"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

// ---- host resources a plugin creates ----

#[test]
fn http_header_collections_are_bounded() {
    let mut instance = hostile(|_| {});
    let cause = expect_trap(process(
        &mut instance,
        json!({ "id": "h", "action": "headers", "count": "100000" }),
    ));
    assert!(
        matches!(&cause, TrapCause::Limit(m) if m.contains("handles open at once")),
        "{cause:?}"
    );
    assert_recovers(&mut instance);
    process(
        &mut instance,
        json!({ "id": "few", "action": "headers", "count": "10" }),
    )
    .expect("a few header collections are fine");
}

#[test]
fn a_50_mib_log_line_is_clipped_not_written_whole() {
    let mut instance = hostile(|_| {});
    let d = process(
        &mut instance,
        json!({ "id": "loud", "action": "big_log", "mib": "50" }),
    )
    .expect("logging is not a failure");
    assert_eq!(d.get("processed"), Some(&json!(true)));
}

// ---- a panic in host code ----

/// A publish sink that panics: host code failing in the middle of a call.
struct PanickingSink;

impl weir::plugin::PublishSink for PanickingSink {
    fn publish(
        &mut self,
        _: weir::core::document::Document,
        _: std::time::Instant,
    ) -> Result<(), String> {
        panic!("a host bug reached through publish");
    }
}

#[test]
fn a_panic_in_host_code_during_a_call_fails_the_call_not_the_thread() {
    let connector = runtime()
        .load_connector("source", &spec("test-connector", json!({ "count": 3 })))
        .expect("load");
    let mut instance = connector.instantiate().expect("instantiate");
    instance.pre_execute("run").expect("pre-execute");
    let err = instance
        .execute("run", Box::new(PanickingSink), Duration::from_secs(5))
        .expect_err("the call fails");
    match &err {
        PluginError::Trap {
            plugin,
            cause: TrapCause::HostPanic(message),
        } => {
            assert_eq!(plugin, "source");
            assert!(
                message.contains("a host bug reached through publish"),
                "{message}"
            );
        }
        other => panic!("expected a host panic, got {other:?}"),
    }
    assert!(err.to_string().contains("a bug in Weir"), "{err}");
    // The thread goes on; the instance was replaced.
    instance.close().expect("close on a fresh instance");
}

#[test]
fn json_text_that_would_expand_past_the_limit_is_refused_while_parsing() {
    // Building 100 MiB of JSON text takes seconds in a debug build on a
    // loaded machine: the deadline is not what this test is about.
    let mut instance = hostile(|s| s.limits.call_timeout = Some(Duration::from_secs(120)));
    for mib in ["1", "100"] {
        let err = expect_document_error(process(
            &mut instance,
            json!({ "id": "bomb", "action": "json_bomb", "mib": mib }),
        ));
        assert!(err.contains("limits.max_document_mib"), "{mib} MiB: {err}");
    }
    assert_recovers(&mut instance);
}
