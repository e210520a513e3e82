//! The host's `sql` capability against a real PostgreSQL, driven by a
//! plugin that tries its bounds (`sql-probe`), one test per class:
//! pages sized before rows leave the cursor (a refused page loses nothing,
//! a row too large is refused before the host holds it), nothing a query
//! does is kept, a query ends with the call that opened it, rows handles
//! are bounded, and a URL that leads elsewhere is refused before a run.

use std::collections::BTreeMap;

use serde_json::Value;
use weir_tests::{postgres_settings, postgres_url};

use crate::sync::Sync;

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

fn db() -> postgres::Client {
    postgres::Client::connect(postgres_url(), postgres::NoTls)
        .expect("connect to the test PostgreSQL")
}

/// `sql-probe` running `steps` (TOML inline tables), granted the test
/// database as `main` and again as `other` (a second connection).
fn probe(steps: &[&str]) -> String {
    format!(
        r#"{{ path = @sql-probe, config = {{ database = "main", steps = [{}] }}, limits = {{ call_timeout = "2m" }}, grants = {{ sql = {{ main = "{db}", other = "{db}" }} }} }}"#,
        steps.join(", "),
        db = postgres_settings()
    )
}

/// Run the probe's `steps` to the end: each step's outcome, by step number.
fn outcomes(steps: &[&str]) -> BTreeMap<usize, Value> {
    let sync = Sync::new(&probe(steps), "");
    assert_eq!(sync.run(&[]), 0, "the probe's run succeeds");
    sync.indexed()
        .into_iter()
        .map(|line| {
            let id = line["id"].as_str().expect("an id").to_owned();
            let n = id.trim_start_matches("step-").parse().expect("step-<n>");
            (n, line)
        })
        .collect()
}

fn error(outcome: &Value) -> &str {
    assert_eq!(outcome["ok"], false, "{outcome}");
    outcome["error"].as_str().unwrap_or_default()
}

#[test]
fn a_refused_page_leaves_its_rows_for_a_smaller_one() {
    let mut client = db();
    let table = format!("wide_{:08x}", fastrand::u32(..));
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, body text);
             INSERT INTO {table} SELECT i, repeat(chr(96 + i), 20 * 1024 * 1024) FROM generate_series(1, 5) AS i;"
        ))
        .expect("table");
    let query = format!("SELECT id, body FROM {table} ORDER BY id");
    let o = outcomes(&[
        &format!(r#"{{ op = "query", statement = "{query}" }}"#),
        r#"{ op = "next", max = 5 }"#,
        r#"{ op = "next", max = 1 }"#,
        r#"{ op = "next", max = 1 }"#,
        r#"{ op = "next", max = 10 }"#,
        r#"{ op = "next", max = 1 }"#,
    ]);
    assert!(error(&o[&1]).contains("ask for fewer"), "{}", o[&1]);
    assert_eq!(
        (o[&2]["rows"].as_u64(), o[&2]["first"].as_str()),
        (Some(1), Some("1"))
    );
    assert_eq!(
        (o[&3]["rows"].as_u64(), o[&3]["first"].as_str()),
        (Some(1), Some("2"))
    );
    assert_eq!(
        (
            o[&4]["rows"].as_u64(),
            o[&4]["first"].as_str(),
            o[&4]["last"].as_str()
        ),
        (Some(3), Some("3"), Some("5")),
        "the rest fit in one page: {}",
        o[&4]
    );
    assert_eq!(o[&5]["rows"], 0, "and then the end: {}", o[&5]);
    assert_eq!(o[&5]["ok"], true);
}

#[test]
fn a_row_too_large_for_any_page_is_refused_before_the_host_takes_it_in() {
    // 300 MiB of text in one value. The run's data segment is capped well
    // below it (120 MB; a run like this one needs about 80): a host that
    // took the row in would fail to allocate and abort; one that sizes it
    // first refuses it by name and goes on.
    let steps = probe(&[
        r#"{ op = "query", statement = "SELECT 1 AS id, repeat('x', 300 * 1024 * 1024) AS big" }"#,
        r#"{ op = "next", max = 1 }"#,
        r#"{ op = "next", max = 1 }"#,
        r#"{ op = "query", statement = "SELECT 7" }"#,
        r#"{ op = "drain", max = 10 }"#,
    ]);
    let sync = Sync::new(&steps, "");
    let output = std::process::Command::new("prlimit")
        .arg("--data=120000000")
        .arg(WEIR)
        .args(["run", "--no-progress"])
        .arg(sync.path("run.toml"))
        .output()
        .expect("prlimit runs weir");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let o: Vec<Value> = sync.indexed();
    let step = |n: usize| {
        o.iter()
            .find(|l| l["id"] == format!("step-{n}"))
            .unwrap_or_else(|| panic!("step {n} in {o:?}"))
    };
    for n in [1, 2] {
        let why = error(step(n));
        assert!(
            why.contains("row 1") && why.contains("more than a page may hold"),
            "{why}"
        );
    }
    assert_eq!(step(4)["first"], "7", "the next query works: {}", step(4));
}

#[test]
fn nothing_a_query_does_is_kept() {
    let mut client = db();
    let objects = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM pg_largeobject_metadata", &[])
            .expect("count")
            .get(0)
    };
    let before = objects(&mut client);
    let seq = format!("seq_{:08x}", fastrand::u32(..));
    client
        .batch_execute(&format!("CREATE SEQUENCE {seq}"))
        .expect("sequence");
    let o = outcomes(&[
        r#"{ op = "query", statement = "SELECT lo_create(0)" }"#,
        r#"{ op = "drain", max = 10 }"#,
        // A session lock taken in one query is gone when it ends: another
        // session can take it.
        r#"{ op = "query", statement = "SELECT pg_advisory_lock(424242)" }"#,
        r#"{ op = "drain", max = 10 }"#,
        r#"{ op = "query", database = "other", statement = "SELECT pg_try_advisory_lock(424242)" }"#,
        r#"{ op = "drain", max = 10 }"#,
        // A setting changed for the session is rolled back with its query.
        r#"{ op = "query", statement = "SELECT set_config('default_transaction_read_only', 'off', false)" }"#,
        r#"{ op = "drain", max = 10 }"#,
        r#"{ op = "query", statement = "SELECT current_setting('default_transaction_read_only')" }"#,
        r#"{ op = "drain", max = 10 }"#,
        &format!(r#"{{ op = "query", statement = "SELECT nextval('{seq}')" }}"#),
        r#"{ op = "drain", max = 10 }"#,
        r#"{ op = "query", statement = "SELECT * FROM pg_class FOR UPDATE" }"#,
        r#"{ op = "drain", max = 10 }"#,
    ]);
    assert_eq!(o[&1]["rows"], 1, "lo_create answered: {}", o[&1]);
    assert_eq!(objects(&mut client), before, "and its object is gone");
    assert_eq!(o[&5]["first"], "true", "the lock was released: {}", o[&5]);
    assert_eq!(o[&9]["first"], "on", "the setting was undone: {}", o[&9]);
    for n in [10, 12] {
        // Refused where the server evaluates it: at the query or its rows.
        let why = [&o[&n], &o[&(n + 1)]]
            .iter()
            .filter_map(|o| o["error"].as_str())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            why.contains("read-only transaction"),
            "{} {}",
            o[&n],
            o[&(n + 1)]
        );
    }
    let value: i64 = client
        .query_one(&format!("SELECT last_value FROM {seq}"), &[])
        .expect("sequence")
        .get(0);
    assert_eq!(value, 1, "the sequence never moved");
}

#[test]
fn a_query_ends_with_the_call_that_opened_it() {
    let o = outcomes(&[
        r#"{ op = "query", pre = true, statement = "SELECT pg_backend_pid() FROM generate_series(1, 10)" }"#,
        r#"{ op = "next", pre = true, max = 1 }"#,
        r#"{ op = "next", max = 1 }"#,
        r#"{ op = "query", database = "other", statement = "SELECT count(*) FROM pg_stat_activity WHERE pid = {first} AND state LIKE 'idle in transaction%'" }"#,
        r#"{ op = "drain", max = 10 }"#,
    ]);
    assert_eq!(o[&1]["rows"], 1, "read in pre-execute: {}", o[&1]);
    assert!(error(&o[&2]).contains("these rows are over"), "{}", o[&2]);
    assert_eq!(
        o[&4]["first"], "0",
        "no transaction left open by the first call: {}",
        o[&4]
    );
}

#[test]
fn a_plugin_holds_a_bounded_number_of_rows_handles_and_statements() {
    let o = outcomes(&[
        r#"{ op = "leak", count = 100, statement = "SELECT 1" }"#,
        r#"{ op = "query", statement = "SELECT 2" }"#,
        r#"{ op = "drain", max = 10 }"#,
        r#"{ op = "query", statement = "SELECT 3", pad = 2000000 }"#,
    ]);
    assert_eq!(o[&0]["rows"], 64, "{}", o[&0]);
    assert!(
        error(&o[&0]).contains("drop those it is done with"),
        "{}",
        o[&0]
    );
    assert_eq!(
        o[&2]["first"], "2",
        "dropped, they are given back: {}",
        o[&2]
    );
    let why = error(&o[&3]);
    assert!(why.contains("a statement may hold 1.0 MiB"), "{why}");
}

#[test]
fn a_grant_that_leads_elsewhere_is_refused_before_a_run() {
    for (extra, named) in [
        (" hostaddr=127.0.0.1", "hostaddr"),
        (" options='-c role=postgres'", "options"),
    ] {
        let config = format!(
            r#"{{ path = @sql-probe, config = {{ database = "main", steps = [] }}, grants = {{ sql = {{ main = "{}{extra}" }} }} }}"#,
            postgres_settings().replace('\'', "")
        );
        let sync = Sync::new(&config, "");
        let output = std::process::Command::new(WEIR)
            .arg("validate")
            .arg(sync.path("run.toml"))
            .output()
            .expect("weir validate");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("grants.sql.main") && stderr.contains(named),
            "{stderr}"
        );
        assert!(!stderr.contains("weir-test"), "no password: {stderr}");
    }
}

/// Backends of this test's runs sleeping on the server.
fn sleeping(client: &mut postgres::Client, marker: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND application_name = $1",
            &[&marker],
        )
        .expect("pg_stat_activity")
        .get(0)
}

#[test]
fn a_statement_left_running_by_a_cut_call_is_stopped_on_the_server() {
    // The probe's call sleeps on the server, its row read through a FETCH;
    // the run is interrupted (SIGINT, no grace) mid-sleep, so the call is
    // cancelled. The host cancels the statement on the server: without that
    // the backend would sleep on for its minute after weir had exited.
    let mut client = db();
    let name = format!("sleeper{:08x}", fastrand::u32(..));
    let plugin = probe(&[
        r#"{ op = "query", statement = "SELECT pg_sleep(60)" }"#,
        r#"{ op = "next", max = 1 }"#,
    ]);
    let sync = Sync::with(&plugin, "", "[runner]\ngrace_period = \"0s\"");
    let config = std::fs::read_to_string(sync.path("run.toml"))
        .expect("config")
        .replace("name = \"source\"", &format!("name = \"{name}\""));
    std::fs::write(sync.path("run.toml"), config).expect("config");
    let marker = format!("weir {name}");
    let mut weir = std::process::Command::new(WEIR)
        .args(["run", "--no-progress"])
        .arg(sync.path("run.toml"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("weir runs");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sleeping(&mut client, &marker) == 0 {
        assert!(std::time::Instant::now() < until, "the probe never slept");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signalling a child this test started and has not reaped.
    unsafe { libc::kill(weir.id() as i32, libc::SIGINT) };
    weir.wait().expect("weir ends");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sleeping(&mut client, &marker) > 0 {
        assert!(
            std::time::Instant::now() < until,
            "the statement still runs on the server 20 s after weir ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn under_a_tenant_a_grants_user_may_only_read() {
    // The test server's `postgres` is a superuser: a tenant's plugin may
    // not use it. A login role of its own, with no powers, may.
    let mut client = db();
    let role = format!("reader_{:08x}", fastrand::u32(..));
    client
        .batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD 'reader-pw'"))
        .expect("role");
    let steps = [
        r#"{ op = "query", statement = "SELECT 1" }"#,
        r#"{ op = "drain", max = 10 }"#,
    ];
    let run_as = |settings: String| {
        let sync = Sync::new(&probe(&steps).replace(&postgres_settings(), &settings), "");
        let config = std::fs::read_to_string(sync.path("run.toml")).expect("config");
        let pipeline = config
            .lines()
            .find_map(|l| l.trim().strip_prefix("name = \"sync_"))
            .map(|rest| format!("sync_{}", rest.trim_end_matches('"')))
            .expect("the pipeline's name");
        std::fs::write(
            sync.path("run.toml"),
            format!("{config}\n[[tenants]]\nname = \"t\"\npipelines = [\"{pipeline}\"]\n"),
        )
        .expect("config");
        assert_eq!(sync.run(&[]), 0);
        sync.indexed()
    };
    let as_superuser = run_as(postgres_settings());
    let why = as_superuser[0]["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("a superuser") && why.contains("may only read"),
        "{why}"
    );
    let reader = postgres_settings()
        .replace("user=postgres", &format!("user={role}"))
        .replace("password=weir-test", "password=reader-pw");
    let as_reader = run_as(reader);
    assert_eq!(as_reader[1]["first"], "1", "{as_reader:?}");
    client
        .batch_execute(&format!("DROP ROLE {role}"))
        .expect("drop role");
}
