//! The HTTP API driven without a server: the [`routes`] of a control plane
//! over a temporary data directory, called with `oneshot`. Runs are put in
//! its store directly, so no plugin is compiled.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::Value;
use tower::ServiceExt;

use super::{ControlPlane, routes};
use crate::tenancy::operator::OperatorConfig;
use crate::tenancy::record::{Counts, RunRecord};

pub(super) const ACME: &str = "acme-token";
pub(super) const ZETA: &str = "zeta-token";
pub(super) const ADMIN: &str = "admin-token";

/// A plane with tenants `acme` and `zeta` and the operator, each signed in
/// with its token; `acme` has run `a1` (finished), `zeta` run `z1`.
pub(super) fn plane(dir: &std::path::Path) -> Arc<ControlPlane> {
    plane_with(dir, "")
}

/// Run `id` of `tenant`, submitted at `at` and finished a millisecond later.
pub(super) fn finished(id: &str, tenant: &str, at: u64) -> RunRecord {
    RunRecord {
        id: id.into(),
        tenant: tenant.into(),
        status: crate::tenancy::RunState::Success,
        submitted_ms: at,
        finished_ms: Some(at + 1),
        counts: Counts::default(),
        summary: None,
        error: None,
    }
}

/// [`plane`], with more `[server]` settings.
pub(super) fn plane_with(dir: &std::path::Path, server: &str) -> Arc<ControlPlane> {
    let plane = open(dir, server);
    for (id, tenant, at) in [("a1", "acme", 1), ("z1", "zeta", 2)] {
        let record = finished(id, tenant, at);
        plane.store.insert(&record, "").expect("insert");
        plane.store.finish(&record).expect("finish");
    }
    plane
}

/// The plane of [`plane_with`] over `dir`, with no runs put in it.
pub(super) fn open(dir: &std::path::Path, server: &str) -> Arc<ControlPlane> {
    let mut text = format!(
        "[server]\ndata_dir = {:?}\nplugin_dir = {:?}\nadmin_token_env = \"ADMIN\"\n{server}\n",
        dir.join("data").display().to_string(),
        dir.join("plugins").display().to_string(),
    );
    for tenant in ["acme", "zeta"] {
        text += &format!(
            "[[tenants]]\nname = \"{tenant}\"\ntoken_env = \"{tenant}\"\n\
             pipelines = [\"{tenant}-books\"]\nplugins = [\"nop_indexer.wasm\"]\n"
        );
    }
    let operator: OperatorConfig = toml::from_str(&text).expect("operator config");
    // Each token variable is named after its tenant.
    let token = |var: &str| {
        let token = match var {
            "acme" => ACME,
            "zeta" => ZETA,
            _ => ADMIN,
        };
        Some(token.to_owned())
    };
    ControlPlane::with_tokens(operator, super::Isolation::Thread, token).expect("control plane")
}

/// `method path` with `token` and `body`: the status and the JSON answer.
pub(super) async fn call(
    plane: &Arc<ControlPlane>,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request.body(body.into()).expect("request");
    let response = routes(Arc::clone(plane))
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

pub(super) async fn get(
    plane: &Arc<ControlPlane>,
    path: &str,
    token: Option<&str>,
) -> (StatusCode, Value) {
    call(plane, "GET", path, token, Body::empty()).await
}

/// The one error shape: the message and the problems, nothing else.
pub(super) fn assert_error(answer: &Value, message: &str) {
    assert_eq!(answer["error"], message, "{answer}");
    assert!(answer["problems"].is_array(), "{answer}");
    assert_eq!(answer.as_object().map(|o| o.len()), Some(2), "{answer}");
}

/// The ids of a page of runs.
pub(super) fn ids(page: &Value) -> Vec<&str> {
    page["runs"]
        .as_array()
        .map(|runs| runs.iter().filter_map(|r| r["id"].as_str()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn without_a_known_token_every_api_call_is_401() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let (status, answer) = get(&plane, "/api/runs", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_error(&answer, "send your token: Authorization: Bearer <token>");
    for (method, path) in [
        ("GET", "/api/runs"),
        ("POST", "/api/runs"),
        ("GET", "/api/runs/a1"),
        ("POST", "/api/runs/a1/stop"),
        ("GET", "/api/runs/a1/dead-letters"),
    ] {
        let (status, answer) = call(&plane, method, path, Some("guess"), "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_error(&answer, "unknown token");
    }
    // The status page needs no token.
    let page = routes(Arc::clone(&plane))
        .oneshot(Request::get("/").body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    assert_eq!(page.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_tenant_sees_only_its_runs_and_the_operator_sees_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let (status, runs) = get(&plane, "/api/runs", Some(ACME)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids(&runs), ["a1"]);
    let (status, run) = get(&plane, "/api/runs/a1", Some(ACME)).await;
    assert_eq!((status, &run["tenant"]), (StatusCode::OK, &"acme".into()));
    for (method, path) in [
        ("GET", "/api/runs/a1"),
        ("POST", "/api/runs/a1/pause"),
        ("POST", "/api/runs/a1/stop"),
        ("GET", "/api/runs/a1/dead-letters"),
        ("GET", "/api/runs/a1/state"),
        ("GET", "/api/runs/a1/state?connector=c&keys=5"),
        ("POST", "/api/runs/a1/state/reset"),
    ] {
        let (status, answer) = call(&plane, method, path, Some(ZETA), "").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
        assert_error(&answer, "no such run");
    }
    let (_, all) = get(&plane, "/api/runs", Some(ADMIN)).await;
    assert_eq!(ids(&all), ["z1", "a1"], "newest first");
    let (status, _) = get(&plane, "/api/runs/a1", Some(ADMIN)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn refused_requests_have_their_status_and_the_one_error_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let (status, answer) = call(&plane, "POST", "/api/runs", Some(ACME), "this is [not toml").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"], "the config is not valid");
    assert_eq!(
        answer["problems"].as_array().map(Vec::len),
        Some(1),
        "{answer}"
    );
    let include = "include = \"/etc/weir.toml\"";
    let (status, answer) = call(&plane, "POST", "/api/runs", Some(ACME), include).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_error(
        &answer,
        "the config asks for what tenant `acme` may not have",
    );
    assert!(
        answer["problems"][0]
            .as_str()
            .unwrap_or_default()
            .contains("cannot include files")
    );
    let (status, answer) = call(&plane, "POST", "/api/runs", Some(ADMIN), include).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_error(
        &answer,
        "the operator's token does not submit runs: use a tenant's",
    );
    let (status, answer) = call(&plane, "POST", "/api/runs/a1/pause", Some(ACME), "").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&answer, "the run has ended (success)");
    let (status, answer) = call(&plane, "POST", "/api/runs/a1/jump", Some(ACME), "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&answer, "no action `jump`: pause, resume or stop");
    let (status, _) = get(&plane, "/api/runs/nope", Some(ADMIN)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Nothing was run.
    let (_, all) = get(&plane, "/api/runs", Some(ADMIN)).await;
    assert_eq!(ids(&all).len(), 2, "{all}");
}

#[tokio::test]
async fn dead_letters_are_read_from_the_runs_directory_up_to_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let (status, page) = get(&plane, "/api/runs/a1/dead-letters", Some(ACME)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        page,
        serde_json::json!({
            "letters": [], "oversized": [], "unreadable": 0, "next_offset": 0, "more": false
        })
    );
    let run_dir = plane.run_dir("a1");
    std::fs::create_dir_all(&run_dir).expect("run dir");
    std::fs::write(
        run_dir.join("dead-letters.jsonl"),
        "{\"id\":\"x\"}\nnot json\n{\"id\":\"y\"}\n{\"id\":\"z\"}\n",
    )
    .expect("dead letters");
    let (_, page) = get(&plane, "/api/runs/a1/dead-letters?limit=3", Some(ACME)).await;
    assert_eq!(
        page["letters"],
        serde_json::json!([{ "id": "x" }, { "id": "y" }])
    );
    assert_eq!(
        (&page["unreadable"], &page["more"]),
        (&1.into(), &true.into())
    );
    let next = format!("/api/runs/a1/dead-letters?offset={}", page["next_offset"]);
    let (_, rest) = get(&plane, &next, Some(ACME)).await;
    assert_eq!(rest["letters"], serde_json::json!([{ "id": "z" }]));
    assert_eq!(rest["more"], false);
}

/// `GET path` from `app`, with `token` if given.
async fn get_from(app: axum::Router, path: &str, token: Option<&str>) -> axum::response::Response {
    let mut request = Request::get(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    app.oneshot(request.body(Body::empty()).expect("request"))
        .await
        .expect("answer")
}

#[tokio::test]
async fn the_servers_metrics_are_the_operators_and_every_answer_says_nosniff() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let health = crate::telemetry::export::Health::default();
    let app = super::server_routes(plane, &health).expect("routes");
    let status = |token: Option<&str>| {
        let app = app.clone();
        let token = token.map(str::to_owned);
        async move {
            let response = get_from(app, "/metrics", token.as_deref()).await;
            let nosniff = response.headers().get("x-content-type-options").cloned();
            (response.status().as_u16(), nosniff)
        }
    };
    assert_eq!(status(None).await.0, 401);
    assert_eq!(status(Some(ACME)).await.0, 403);
    let (code, nosniff) = status(Some(ADMIN)).await;
    assert_eq!(code, 200);
    assert_eq!(
        nosniff.as_ref().and_then(|v| v.to_str().ok()),
        Some("nosniff")
    );
    let page = app
        .oneshot(Request::get("/").body(Body::empty()).expect("request"))
        .await
        .expect("answer");
    let csp = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .expect("a content security policy");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
}

#[test]
fn a_run_that_panics_is_recorded_as_failed_and_gives_its_tenants_slot_back() {
    use super::auth::Principal;
    use super::live::LiveRun;

    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let acme = plane.operator.tenant("acme").expect("acme").clone();
    let run = Arc::new(LiveRun::new(
        "p1".into(),
        "acme".into(),
        Arc::default(),
        Default::default(),
        Default::default(),
        None,
        None,
    ));
    {
        let _starting = plane.reserve(&acme).expect("a place in the quota");
        plane.store.insert(&run.record(), "").expect("insert");
        plane.lock().runs.insert("p1".into(), Arc::clone(&run));
    }
    assert_eq!(plane.lock().going("acme"), 1, "the live run counts");
    let worker = {
        let plane = Arc::clone(&plane);
        let run = Arc::clone(&run);
        std::thread::spawn(move || {
            plane.supervise(
                &run,
                Box::new(|live| {
                    let panicked = std::panic::catch_unwind(|| -> crate::run::RunResult {
                        panic!("a bug in the run")
                    });
                    super::view::ended(live, panicked)
                }),
            )
        })
    };
    worker.join().expect("the panic stays inside supervise");

    assert_eq!(plane.lock().going("acme"), 0, "the slot is given back");
    let record = plane
        .get(&Principal::Tenant("acme".into()), "p1")
        .expect("recorded")
        .record;
    assert_eq!(record.status, crate::tenancy::RunState::Failure);
    let error = record.error.unwrap_or_default();
    assert!(error.contains("a bug in the run"), "{error}");
    assert!(record.finished_ms.is_some());
}

#[test]
fn a_start_that_fails_any_way_gives_the_place_in_the_quota_back() {
    use super::auth::Principal;

    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let acme = Principal::Tenant("acme".into());
    let max = plane
        .operator
        .tenant("acme")
        .expect("acme")
        .max_concurrent_runs;
    // More failed starts than the quota has places: none leaks one.
    for text in ["not toml [", "[[pipelines]]\nname = \"zeta-books\"\n", ""]
        .iter()
        .cycle()
        .take(max + 3)
    {
        assert!(plane.submit(&acme, text).is_err(), "{text:?} was admitted");
    }
    assert_eq!(plane.lock().going("acme"), 0);
}

#[tokio::test]
async fn a_tenant_reads_its_own_figures_and_no_one_elses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let health = crate::telemetry::export::Health::default();
    let app = super::server_routes(plane, &health).expect("routes");
    for (tenant, n) in [("acme", 3), ("zeta", 4)] {
        metrics::counter!("weir_figures_test_total", "tenant" => tenant, "pipeline" => format!("{tenant}-books"))
            .increment(n);
    }
    let read = |token: Option<&'static str>| {
        let app = app.clone();
        async move {
            let response = get_from(app, "/api/metrics", token).await;
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("body");
            (status, String::from_utf8_lossy(&bytes).into_owned())
        }
    };
    assert_eq!(read(None).await.0, StatusCode::UNAUTHORIZED);
    let (status, acme) = read(Some(ACME)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(acme.contains("pipeline=\"acme-books\""), "{acme}");
    assert!(!acme.contains("zeta"), "{acme}");
    assert!(
        !acme.contains("weir_resident_bytes"),
        "the process is the operator's"
    );
    let (_, all) = read(Some(ADMIN)).await;
    assert!(
        all.contains("acme-books") && all.contains("zeta-books"),
        "{all}"
    );
}
