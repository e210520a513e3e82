//! Schedules through the API's router (no server) and the plane's clock
//! driven by hand: a start is read from what was written before it, so a
//! plane opened again on the same store never makes it twice; a start
//! that would overlap the last run, or is late, is skipped and said so.
//! The plugins are files of junk: admitted, never run (a start fails).

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Duration as Delta, Utc};
use serde_json::Value;

use super::super::ControlPlane;
use super::super::tests::{ACME, ADMIN, ZETA, call, finished, get, open};
use super::{at, kept};
use crate::tenancy::record::RunState;

/// A plane whose tenants' plugin files exist (junk: admitted, not run).
fn plane(dir: &std::path::Path) -> Arc<ControlPlane> {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("plugins");
    std::fs::write(plugins.join("nop_indexer.wasm"), b"not wasm").expect("plugin");
    open(dir, "")
}

fn config(pipeline: &str, schedule: &str) -> String {
    format!(
        "[[connectors]]\nname = \"c\"\npipeline = \"{pipeline}\"\nplugin = {{ path = \"nop_indexer.wasm\" }}\n\
         [[pipelines]]\nname = \"{pipeline}\"\nstages = []\n\
         [indexer]\nplugin = {{ path = \"nop_indexer.wasm\" }}\n\
         [schedule]\n{schedule}\n"
    )
}

async fn create(plane: &Arc<ControlPlane>, token: &str, schedule: &str) -> Value {
    let tenant = if token == ZETA { "zeta" } else { "acme" };
    let (status, view) = call(
        plane,
        "POST",
        "/api/runs",
        Some(token),
        config(&format!("{tenant}-books"), schedule),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    view
}

fn next_ms(view: &Value) -> u64 {
    view["next_start_ms"].as_u64().expect("a next start")
}

#[tokio::test]
async fn a_config_with_a_schedule_is_kept_and_shown_with_its_next_start_to_its_tenant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let before = u64::try_from(Utc::now().timestamp_millis()).expect("now");
    let view = create(&plane, ACME, "every = \"1h\"\njitter = \"1m\"").await;
    let id = view["id"].as_str().expect("id").to_owned();
    assert_eq!(view["schedule"], "every 1h, jitter up to 1m", "{view}");
    assert_eq!(view["settings"]["every"], "1h");
    let next = next_ms(&view);
    // An hour from now, and at most the jitter later.
    assert!(
        next >= before + 3_600_000 && next <= before + 3_660_000 + 5_000,
        "{view}"
    );
    assert!(
        view["next_start"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{view}"
    );
    assert_eq!(view["last_run"], Value::Null);
    create(
        &plane,
        ZETA,
        "cron = \"0 3 * * *\"\ntime_zone = \"Europe/Berlin\"",
    )
    .await;

    let (status, listed) = get(&plane, "/api/schedules", Some(ACME)).await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = listed["schedules"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "a tenant sees its own schedules only");
    assert_eq!(
        listed["schedules"][0].get("config"),
        None,
        "a list holds no configs"
    );
    let (_, all) = get(&plane, "/api/schedules", Some(ADMIN)).await;
    assert_eq!(all["schedules"].as_array().map(Vec::len), Some(2));
    let (status, one) = get(&plane, &format!("/api/schedules/{id}"), Some(ACME)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        one["config"]
            .as_str()
            .is_some_and(|c| c.contains("[schedule]"))
    );
    let (status, _) = get(&plane, &format!("/api/schedules/{id}"), Some(ZETA)).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's is not found"
    );
}

#[tokio::test]
async fn a_schedule_that_does_not_read_is_refused_with_each_problem_where_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    for (schedule, problem) in [
        ("every = \"0s\"", "schedule.every: "),
        ("every = \"1h\"\ncron = \"@daily\"", "schedule: "),
        ("cron = \"61 * * * *\"", "schedule.cron: "),
        (
            "cron = \"@daily\"\ntime_zone = \"Nowhere/Else\"",
            "schedule.time_zone: ",
        ),
        ("every = \"1m\"\njitter = \"2m\"", "schedule.jitter: "),
        ("every = \"1h\"\nat = \"noon\"", "schedule.at"),
    ] {
        for path in ["/api/runs", "/api/schedules"] {
            let (status, answer) = call(
                &plane,
                "POST",
                path,
                Some(ACME),
                config("acme-books", schedule),
            )
            .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{schedule}: {answer}");
            let problems = answer["problems"].to_string();
            assert!(problems.contains(problem), "{schedule}: {answer}");
        }
    }
    // A schedule needs its [schedule] and its connectors.
    let plain = config("acme-books", "").replace("[schedule]\n", "");
    let (status, answer) = call(&plane, "POST", "/api/schedules", Some(ACME), plain).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["problems"][0]
            .as_str()
            .is_some_and(|p| p.starts_with("schedule: "))
    );
    let (_, listed) = get(&plane, "/api/schedules", Some(ADMIN)).await;
    assert_eq!(listed["schedules"], serde_json::json!([]), "none kept");
}

#[tokio::test]
async fn a_due_start_is_written_down_first_and_a_reopened_plane_does_not_make_it_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let view = create(&plane, ACME, "every = \"1h\"").await;
    let id = view["id"].as_str().expect("id").to_owned();
    let due = at(next_ms(&view));
    plane.tick(due);
    let (_, after) = get(&plane, &format!("/api/schedules/{id}"), Some(ACME)).await;
    // The start was made (its run did not start: the plugins are junk).
    assert_eq!(
        after["last_start_ms"].as_u64(),
        Some(next_ms(&view)),
        "{after}"
    );
    assert!(
        after["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("did not start")),
        "{after}"
    );
    let next = next_ms(&after);
    assert_eq!(next, next_ms(&view) + 3_600_000, "{after}");
    drop(plane);

    // A plane opened again (a restart, or a standby reading the same rows)
    // reads that the start was made.
    let again = open(dir.path(), "");
    let (_, read) = get(&again, &format!("/api/schedules/{id}"), Some(ACME)).await;
    assert_eq!(read["next_start_ms"].as_u64(), Some(next), "{read}");
    again.tick(due);
    let (_, still) = get(&again, &format!("/api/schedules/{id}"), Some(ACME)).await;
    assert_eq!(
        still["last_start_ms"], after["last_start_ms"],
        "not made again"
    );
    assert_eq!(still["next_start_ms"].as_u64(), Some(next));
}

#[tokio::test]
async fn a_start_while_the_last_run_goes_on_or_too_late_is_skipped_and_said_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let view = create(&plane, ACME, "every = \"1h\"").await;
    let id = view["id"].as_str().expect("id").to_owned();
    // Its last run goes on.
    let mut going = finished("r-going", "acme", 5);
    going.status = RunState::Running;
    going.finished_ms = None;
    plane.store.insert(&going, "").expect("insert");
    kept::link(&plane.store, "r-going", &id).expect("link");
    plane
        .schedules
        .lock()
        .get_mut(&id)
        .expect("kept")
        .kept
        .last_run = Some("r-going".into());
    let first = next_ms(&view);
    plane.tick(at(first));
    let (_, skipped) = get(&plane, &format!("/api/schedules/{id}"), Some(ACME)).await;
    assert_eq!(skipped["skipped"], 1, "{skipped}");
    assert_eq!(skipped["last_skip"]["reason"], "overlap", "{skipped}");
    assert_eq!(skipped["last_run"]["id"], "r-going");
    assert_eq!(skipped["last_run"]["status"], "running");
    assert_eq!(skipped["last_start_ms"], Value::Null, "nothing started");
    assert_eq!(next_ms(&skipped), first + 3_600_000);
    // The run shows the schedule that started it, and its next start.
    let (_, run) = get(&plane, "/api/runs/r-going", Some(ACME)).await;
    assert_eq!(run["schedule"]["id"], id.as_str(), "{run}");
    assert_eq!(
        run["schedule"]["next_start_ms"].as_u64(),
        Some(first + 3_600_000)
    );

    // Three hours later (the plane was down): that start is late, and
    // the two after it were missed; the next is in the future.
    let now = at(first) + Delta::hours(3) + Delta::minutes(2);
    plane.tick(now);
    let (_, late) = get(&plane, &format!("/api/schedules/{id}"), Some(ACME)).await;
    assert_eq!(late["last_skip"]["reason"], "late", "{late}");
    assert_eq!(late["last_skip"]["count"], 3, "{late}");
    assert_eq!(late["skipped"], 4, "{late}");
    assert_eq!(next_ms(&late), first + 4 * 3_600_000);
}

#[tokio::test]
async fn a_replaced_schedule_starts_on_its_new_time_and_a_deleted_one_starts_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let view = create(&plane, ACME, "every = \"1h\"").await;
    let id = view["id"].as_str().expect("id").to_owned();
    let path = format!("/api/schedules/{id}");
    let (status, _) = call(
        &plane,
        "PUT",
        &path,
        Some(ZETA),
        config("zeta-books", "every = \"2h\""),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another tenant's");
    let (status, replaced) = call(
        &plane,
        "PUT",
        &path,
        Some(ACME),
        config("acme-books", "every = \"2h\""),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["schedule"], "every 2h");
    assert!(
        next_ms(&replaced) >= next_ms(&view) + 3_500_000,
        "{replaced}"
    );
    let (status, _) = call(&plane, "DELETE", &path, Some(ZETA), "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, deleted) = call(&plane, "DELETE", &path, Some(ACME), "").await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let (status, _) = get(&plane, &path, Some(ACME)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    plane.tick(at(next_ms(&replaced)));
    assert!(kept::all(&plane.store).expect("kept").is_empty());
    drop(plane);
    let again = open(dir.path(), "");
    let (_, listed) = get(&again, "/api/schedules", Some(ACME)).await;
    assert_eq!(listed["schedules"], serde_json::json!([]), "gone for good");
}

#[tokio::test]
async fn a_tenant_keeps_at_most_its_max_schedules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let max = plane.operator.tenant("acme").expect("acme").max_schedules;
    for _ in 0..max {
        create(&plane, ACME, "cron = \"@daily\"").await;
    }
    let (status, answer) = call(
        &plane,
        "POST",
        "/api/schedules",
        Some(ACME),
        config("acme-books", "cron = \"@daily\""),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("max_schedules"))
    );
    create(&plane, ZETA, "cron = \"@daily\"").await;
}
