//! Hosted ingestion past one machine, on a real broker: two `weir serve`
//! control planes (one leads, one stands by) and `weir fleet` workers, two
//! tenants submitting runs. A fleet worker is killed (-9), then the control
//! plane that leads: the standby takes over, resumes the runs from their
//! journals, and every run ends with every document indexed and an exact
//! summary; a worker added mid-run takes partitions from the others.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_tests::{Proc, kafka_bootstrap, plugins_dir};

use crate::operations::{logged_address, request};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");
const ADMIN: &str = "fleet-admin-token";
const FLEET: &str = "fleet-worker-token";
const TOKENS: [(&str, &str); 2] = [("ta", "tenant-a-token"), ("tb", "tenant-b-token")];
const DOCS: u64 = 1500;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

struct Fleet {
    dir: tempfile::TempDir,
    name: String,
    ports: [u16; 2],
}

impl Fleet {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for (tenant, _) in TOKENS {
            std::fs::create_dir_all(dir.path().join(format!("{tenant}-out"))).expect("out");
        }
        Self {
            dir,
            name: format!("fleet{:08x}", fastrand::u32(..)),
            ports: [free_port(), free_port()],
        }
    }

    /// Control plane `n`'s operator file (each its own address and data).
    fn operator(&self, n: usize) -> PathBuf {
        let tenants: String = TOKENS
            .iter()
            .map(|(tenant, _)| {
                format!(
                    r#"
[[tenants]]
name = "{tenant}"
token_env = "TOKEN_{tenant}"
pipelines = ["{tenant}-books"]
plugins = ["test_connector.wasm", "test_indexer.wasm", "hostile_stage.wasm"]
dirs = ["{tenant}-out"]
max_docs_per_second = 100
fleet_pairs = 2
"#
                )
            })
            .collect();
        let text = format!(
            r#"
[server]
addr = "127.0.0.1:{port}"
data_dir = "data-{n}"
plugin_dir = {plugins:?}
admin_token_env = "ADMIN_TOKEN"

[fleet]
name = "{name}"
token_env = "FLEET_TOKEN"
control = ["http://127.0.0.1:{p0}", "http://127.0.0.1:{p1}"]
partitions = 6
pairs = 1
work_dir = "fleet-work"
session_timeout = "6s"
retire_after = "90s"
kafka = {{ bootstrap_servers = {bootstrap:?}, heartbeat_interval = "500ms", consumer = {{ "session.timeout.ms" = "6000", "heartbeat.interval.ms" = "1000" }} }}
{tenants}"#,
            port = self.ports[n],
            plugins = plugins_dir().display().to_string(),
            name = self.name,
            p0 = self.ports[0],
            p1 = self.ports[1],
            bootstrap = kafka_bootstrap(),
        );
        let path = self.dir.path().join(format!("operator-{n}.toml"));
        // Whole or not at all: a process started a moment ago may be
        // reading it (written in place, it could read it half written).
        let partial = self
            .dir
            .path()
            .join(format!("operator-{n}.toml.{:08x}", fastrand::u32(..)));
        std::fs::write(&partial, text).expect("operator");
        std::fs::rename(&partial, &path).expect("operator");
        path
    }

    fn envs() -> Vec<(&'static str, String)> {
        let mut envs = vec![
            ("ADMIN_TOKEN", ADMIN.to_owned()),
            ("FLEET_TOKEN", FLEET.to_owned()),
        ];
        envs.extend([
            ("TOKEN_ta", TOKENS[0].1.to_owned()),
            ("TOKEN_tb", TOKENS[1].1.to_owned()),
        ]);
        envs
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    fn log_text(&self, name: &str) -> String {
        std::fs::read_to_string(self.log(name)).unwrap_or_default()
    }

    fn control_plane(&self, n: usize) -> Proc {
        self.start(&format!("serve-{n}"), "serve", n)
    }

    fn worker(&self, n: usize) -> Proc {
        self.start(&format!("fleet-{n}"), "fleet", 0)
    }

    /// `weir <command>` on operator file `operator`, logging to `name`.
    fn start(&self, name: &str, command: &str, operator: usize) -> Proc {
        let config = self.operator(operator).display().to_string();
        Proc::start(
            name,
            Path::new(WEIR),
            &[command, &config],
            &Self::envs(),
            &self.log(name),
        )
    }

    /// The base URL of control plane `n` once it leads.
    fn leading(&self, n: usize, within: Duration) -> String {
        let name = format!("serve-{n}");
        let deadline = Instant::now() + within;
        loop {
            let log = self.log_text(&name);
            if log.contains("status page on http://") {
                return format!("http://{}", logged_address(&log, "status page on http://"));
            }
            assert!(Instant::now() < deadline, "{name} did not lead:\n{log}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn run_config(&self, tenant: &str) -> String {
        let out = self.dir.path().join(format!("{tenant}-out"));
        format!(
            r#"
[runner]
connector_timeout = "600s"
liveness_timeout = "60s"
[indexer]
batch_size = 50
batch_timeout = "20ms"
plugin = {{ path = "test_indexer.wasm", config = {{ record = "/out/indexed.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
[[connectors]]
name = "docs"
pipeline = "{tenant}-books"
plugin = {{ path = "test_connector.wasm", config = {{ docs = [{{ id = "bad-{tenant}", action = "fail" }}], count = {DOCS} }} }}
[[pipelines]]
name = "{tenant}-books"
stages = [{{ name = "hostile", plugin = {{ path = "hostile_stage.wasm" }} }}]
"#,
            out = out.display().to_string(),
        )
    }

    /// The topic prefixes of this fleet's specs, as its workers logged the
    /// topics they serve (other tests' fleets share the broker).
    fn prefixes(&self) -> BTreeSet<String> {
        (0..4)
            .flat_map(|n| {
                let log = self.log_text(&format!("fleet-{n}"));
                log.match_indices("topic=w")
                    .filter_map(|(at, _)| log.get(at + 6..at + 6 + 18))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The distinct ids tenant `tenant`'s indexers recorded, and the lines.
    fn indexed(&self, tenant: &str) -> (BTreeSet<String>, usize) {
        let path = self
            .dir
            .path()
            .join(format!("{tenant}-out"))
            .join("indexed.jsonl");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let ids: BTreeSet<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|d| d["id"].as_str().map(str::to_owned))
            .collect();
        (ids, text.lines().count())
    }
}

impl Drop for Fleet {
    /// A failed test keeps its processes' logs, under the system's temp dir.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let kept = std::env::temp_dir().join(format!("weir-fleet-test-{}", self.name));
        let _ = std::fs::create_dir_all(&kept);
        for entry in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.path().extension().is_some_and(|e| e == "log") {
                let _ = std::fs::copy(entry.path(), kept.join(entry.file_name()));
            }
        }
        eprintln!("the fleet test's logs are in {}", kept.display());
    }
}

/// The live `weir serve-run` processes whose parent is `plane`.
fn run_processes(plane: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let parent = stat_field(pid, 1).and_then(|p| p.parse::<u32>().ok());
        if parent == Some(plane) && cmdline.split(|b| *b == 0).any(|arg| arg == b"serve-run") {
            found.push(pid);
        }
    }
    found
}

/// Field `n` (from 0) after the command in `/proc/<pid>/stat`: 0 is the
/// state, 1 the parent's pid.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(n).map(str::to_owned)
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped).
fn ended(pid: u32) -> bool {
    stat_field(pid, 0).is_none_or(|state| state == "Z" || state == "X")
}

/// Wait until every process of `pids` has ended, up to `within`.
fn assert_end_within(pids: &[u32], within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|&p| !ended(p)).collect();
        if alive.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still running after {within:?}: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn token(tenant: &str) -> &'static str {
    TOKENS.iter().find(|(t, _)| *t == tenant).expect("tenant").1
}

#[test]
fn runs_survive_a_fleet_worker_and_the_leading_control_plane_killed_mid_run() {
    let fleet = Fleet::new();
    let mut first = fleet.control_plane(0);
    let url = fleet.leading(0, Duration::from_secs(90));
    let mut standby = fleet.control_plane(1);
    let mut workers: Vec<Proc> = (0..3).map(|n| fleet.worker(n)).collect();

    let mut runs = Vec::new();
    for (tenant, _) in TOKENS {
        let (status, run) = request(
            "POST",
            &format!("{url}/api/runs"),
            Some(token(tenant)),
            &fleet.run_config(tenant),
        );
        assert_eq!(status, 201, "{run}\n{}", fleet.log_text("serve-0"));
        runs.push((tenant, run["id"].as_str().expect("id").to_owned()));
    }
    // A tenant's config names its own pipelines only, and its own folders.
    let (status, refused) = request(
        "POST",
        &format!("{url}/api/runs"),
        Some(token("tb")),
        &fleet.run_config("ta"),
    );
    assert_eq!(status, 403, "{refused}");

    // Mid-run: a fleet worker dies, then the control plane that leads.
    let wait_indexed = |tenant: &str, at_least: usize| {
        let deadline = Instant::now() + Duration::from_secs(180);
        while fleet.indexed(tenant).0.len() < at_least {
            assert!(
                Instant::now() < deadline,
                "{tenant}: no progress\n{}\n{}",
                fleet.log_text("serve-0"),
                fleet.log_text("fleet-0")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // Published counts, from the API: the kills come while the connectors
    // still publish (100 a second), however loaded the machine is.
    let published = |tenant: &str, id: &str| {
        let (_, run) = request(
            "GET",
            &format!("{url}/api/runs/{id}"),
            Some(token(tenant)),
            "",
        );
        run["counts"]["published"].as_u64().unwrap_or_default()
    };
    let wait_published = |at_least: u64| {
        let deadline = Instant::now() + Duration::from_secs(180);
        while runs
            .iter()
            .any(|(tenant, id)| published(tenant, id) < at_least)
        {
            assert!(
                Instant::now() < deadline,
                "no progress\n{}",
                fleet.log_text("serve-0")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_indexed("ta", 100);
    wait_published(200);
    workers[0].kill_hard();
    wait_published(400);
    for (tenant, id) in &runs {
        assert!(
            published(tenant, id) < DOCS,
            "{tenant}'s connector still publishes"
        );
    }
    let (_, view) = request("GET", &format!("{url}/api/fleet"), Some(ADMIN), "");
    println!("fleet before the control plane dies: {view}");
    let orphans = run_processes(first.child.id());
    assert_eq!(orphans.len(), 2, "one run process per run: {orphans:?}");
    first.kill_hard();
    // Its run processes end with it (however their logs, whose reader is
    // gone, fare), before the plane that takes over resumes their runs.
    assert_end_within(
        &orphans,
        Duration::from_secs(10),
        "the killed control plane's run processes",
    );
    let url = fleet.leading(1, Duration::from_secs(60));
    // A worker added now takes partitions from the others.
    workers.push(fleet.worker(3));

    for (tenant, id) in &runs {
        let deadline = Instant::now() + Duration::from_secs(300);
        let run = loop {
            let (status, run) = request(
                "GET",
                &format!("{url}/api/runs/{id}"),
                Some(token(tenant)),
                "",
            );
            assert_eq!(status, 200, "{run}");
            let state = run["status"].as_str().unwrap_or_default().to_owned();
            if !["running", "paused", "stopping"].contains(&state.as_str()) {
                break run;
            }
            assert!(
                Instant::now() < deadline,
                "{tenant}'s run did not end: {run}\n{}",
                fleet.log_text("serve-1")
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(
            run["status"],
            "partial_success",
            "{run}\n{}",
            fleet.log_text("serve-1")
        );
        let counts = &run["counts"];
        assert_eq!(counts["published"], DOCS + 1, "{run}");
        assert_eq!(counts["indexed"], DOCS, "{run}");
        assert_eq!(counts["failed"], 1, "{run}");
        // What went twice is counted apart, in the summary.
        assert!(
            run["summary"]["connectors"][0]["duplicates"].is_u64(),
            "{run}"
        );
        // Its dead letter, failed on a fleet worker before the takeover,
        // is read from the API of the control plane that took over.
        let (status, page) = request(
            "GET",
            &format!("{url}/api/runs/{id}/dead-letters"),
            Some(token(tenant)),
            "",
        );
        assert_eq!(status, 200, "{page}");
        let letters = page["letters"].as_array().expect("letters");
        assert_eq!(letters.len(), 1, "{page}");
        assert_eq!(letters[0]["id"], format!("bad-{tenant}"), "{page}");
        assert_eq!(letters[0]["run_id"], id.as_str(), "{page}");
        assert_eq!(letters[0]["pipeline"], format!("{tenant}-books"), "{page}");
        assert!(
            letters[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("asked to fail")),
            "{page}"
        );
        let (ids, lines) = fleet.indexed(tenant);
        assert_eq!(ids.len() as u64, DOCS, "{tenant}: every document indexed");
        println!(
            "{tenant}: {lines} lines for {DOCS} documents; summary {}",
            run["summary"]
        );
    }
    let resumed = fleet.log_text("serve-1");
    assert!(
        resumed.contains("resuming a run the last control plane left going on"),
        "{resumed}"
    );

    let (status, view) = request("GET", &format!("{url}/api/fleet"), Some(ADMIN), "");
    assert_eq!(status, 200, "{view}");
    println!("fleet after: {view}");
    let served_by_new = view["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter(|w| {
            w["worker"]
                .as_str()
                .is_some_and(|w| w.ends_with(&format!(":{}", workers[3].child.id())))
        })
        .flat_map(|w| w["pipelines"].as_array().cloned().unwrap_or_default())
        .count();
    assert_eq!(
        served_by_new, 2,
        "the new worker serves both tenants' pipelines: {view}"
    );
    // Every source record is committed soon after the runs end (workers
    // commit at most every 200 ms): the lag falls to 0.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, view) = request("GET", &format!("{url}/api/fleet"), Some(ADMIN), "");
        let pipelines = view["pipelines"].as_array().cloned().unwrap_or_default();
        if pipelines.len() == 2 && pipelines.iter().all(|p| p["lag"] == 0) {
            break;
        }
        assert!(Instant::now() < deadline, "the lag never fell to 0: {view}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // It takes source partitions of both pipelines from the others, which
    // held all of them (once each group has rebalanced).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let fourth = fleet.log_text("fleet-3");
        let took = |tenant: &str| {
            fourth.lines().any(|l| {
                l.contains("partitions assigned")
                    && l.contains(&format!("pipeline={tenant}-books"))
                    && l.contains("role=\"worker\"")
                    && !l.contains("partitions=[]")
            })
        };
        if TOKENS.iter().all(|(tenant, _)| took(tenant)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new worker was not given source partitions of both pipelines:\n{fourth}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let killed = format!(":{}", workers[0].child.id());
    for worker in view["workers"].as_array().expect("workers") {
        let dead = worker["worker"]
            .as_str()
            .is_some_and(|w| w.ends_with(&killed));
        assert_eq!(worker["alive"], !dead, "{view}");
    }
    // The status page shows the fleet to the operator: its pipelines, as
    // long as the fleet still serves them (idle for `retire_after`, they
    // retire; on a slow machine that can come before the page is read).
    let dom = crate::operations::browser(&format!("{url}/#token={ADMIN}"), &["--dump-dom"]);
    assert!(
        !dom.contains(r#"<div id="fleet-box" hidden"#),
        "the fleet is shown:\n{dom}"
    );
    let (_, after) = request("GET", &format!("{url}/api/fleet"), Some(ADMIN), "");
    if after["pipelines"].as_array().is_some_and(|p| p.len() == 2) {
        for (tenant, _) in TOKENS {
            assert!(
                dom.contains(&format!(r#"<td class="pipeline">{tenant}-books</td>"#)),
                "{tenant}'s pipeline is on the page:\n{dom}"
            );
        }
        assert!(
            dom.contains(r#"<td class="num lag">0</td>"#),
            "lags are shown:\n{dom}"
        );
    } else {
        println!("the specs retired before the page was read: {after}");
    }
    assert!(
        dom.contains(r#"class="gone""#),
        "the killed worker is shown gone"
    );
    // The tenants' pipelines were served under their own policies only.
    let (status, _) = request("GET", &format!("{url}/api/fleet"), Some(token("ta")), "");
    assert_eq!(status, 403);

    // Idle for fleet.retire_after, the specs retire: the workers stop
    // serving their pipelines, and their topics are deleted.
    let prefixes = fleet.prefixes();
    assert_eq!(prefixes.len(), 2, "one spec per tenant: {prefixes:?}");
    assert_eq!(pipeline_topics(&prefixes).len(), 8, "4 topics per spec");
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let (_, view) = request("GET", &format!("{url}/api/fleet"), Some(ADMIN), "");
        let served: usize = view["workers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|w| w["alive"] == true)
            .map(|w| w["pipelines"].as_array().map_or(0, Vec::len))
            .sum();
        let topics = pipeline_topics(&prefixes);
        if view["pipelines"].as_array().is_some_and(Vec::is_empty)
            && served == 0
            && topics.is_empty()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the idle specs were not retired: {view}\ntopics left: {topics:?}\n{}",
            fleet.log_text("serve-1")
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    for mut worker in workers.into_iter().skip(1) {
        assert!(worker.stop(), "a fleet worker stops cleanly");
    }
    standby.kill_hard();
}

#[test]
fn a_fleet_run_is_paused_resumed_and_stopped_through_the_api() {
    let fleet = Fleet::new();
    let mut plane = fleet.control_plane(0);
    let url = fleet.leading(0, Duration::from_secs(90));
    let mut standby = fleet.control_plane(1);
    let mut worker = fleet.worker(0);
    let call = |method: &str, path: &str| {
        request(
            method,
            &format!("{url}/api/runs{path}"),
            Some(token("ta")),
            "",
        )
    };
    let (status, run) = request(
        "POST",
        &format!("{url}/api/runs"),
        Some(token("ta")),
        &fleet.run_config("ta"),
    );
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("id").to_owned();
    let published = || {
        call("GET", &format!("/{id}")).1["counts"]["published"]
            .as_u64()
            .unwrap_or_default()
    };
    let wait_published = |at_least: u64| {
        let deadline = Instant::now() + Duration::from_secs(120);
        while published() < at_least {
            assert!(
                Instant::now() < deadline,
                "no progress\n{}\n{}",
                fleet.log_text("serve-0"),
                fleet.log_text("fleet-0")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_published(100);

    // Paused, the run's connector publishes nothing (at 100 a second, a
    // second and a half would be 150 more).
    let (status, paused) = call("POST", &format!("/{id}/pause"));
    assert_eq!(
        (status, paused["status"].as_str()),
        (200, Some("paused")),
        "{paused}"
    );
    // The count settles first: a publish under way as the pause came, and
    // counts the run's process had not reported yet, still arrive (later on
    // a loaded machine). Settled: the same over a second of reports.
    let settle_by = Instant::now() + Duration::from_secs(60);
    let mut at_pause = published();
    loop {
        std::thread::sleep(Duration::from_millis(1000));
        let now = published();
        if now == at_pause {
            break;
        }
        assert!(
            Instant::now() < settle_by,
            "publishing went on while paused"
        );
        at_pause = now;
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        published() <= at_pause + 1,
        "publishing went on while paused"
    );
    let (status, resumed) = call("POST", &format!("/{id}/resume"));
    assert_eq!(
        (status, resumed["status"].as_str()),
        (200, Some("running")),
        "{resumed}"
    );
    wait_published(at_pause + 100);

    // Stopped, it ends interrupted, before its end, with what it published
    // accounted for.
    let (status, stopping) = call("POST", &format!("/{id}/stop"));
    assert_eq!(status, 200, "{stopping}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let run = loop {
        let (_, run) = call("GET", &format!("/{id}"));
        if !["running", "paused", "stopping"].contains(&run["status"].as_str().unwrap_or_default())
        {
            break run;
        }
        assert!(Instant::now() < deadline, "the run did not stop: {run}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(run["status"], "interrupted", "{run}");
    let counts = &run["counts"];
    let published = counts["published"].as_u64().expect("published");
    assert!(published < DOCS, "{run}");
    assert!(
        counts["indexed"].as_u64().expect("indexed") + counts["failed"].as_u64().expect("failed")
            <= published,
        "{run}"
    );
    assert!(worker.stop(), "the fleet worker stops cleanly");
    // A standby stopped while it waits to lead exits cleanly.
    assert!(
        standby.wait_for_log(
            &fleet.log("serve-1"),
            "standby: waiting to lead",
            1,
            Duration::from_secs(60)
        ),
        "{}",
        fleet.log_text("serve-1")
    );
    assert!(standby.stop(), "{}", fleet.log_text("serve-1"));
    plane.kill_hard();
}

/// The pipeline topics on the broker behind `prefixes` (not connector
/// state, which outlives a spec).
fn pipeline_topics(prefixes: &BTreeSet<String>) -> Vec<String> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    metadata
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .filter(|t| prefixes.iter().any(|p| t.starts_with(p.as_str())))
        .filter(|t| !t.ends_with("_state"))
        .collect()
}

/// A schedule survives the leading control plane killed (-9): the standby
/// takes over and reads it from the fleet's topic, starts it on, and never
/// starts it twice for one time nor while a run of it goes on.
#[test]
fn a_schedule_survives_its_leading_plane_killed_without_a_double_start() {
    const EVERY_MS: u64 = 3_000;
    let fleet = Fleet::new();
    let mut first = fleet.control_plane(0);
    let url = fleet.leading(0, Duration::from_secs(90));
    let _standby = fleet.control_plane(1);
    let _worker = fleet.worker(0);
    let config = format!(
        "{}\n[schedule]\nevery = \"{}s\"\n",
        fleet
            .run_config("ta")
            .replace(&format!("count = {DOCS}"), "count = 30"),
        EVERY_MS / 1000
    );
    let (status, view) = request(
        "POST",
        &format!("{url}/api/runs"),
        Some(token("ta")),
        &config,
    );
    assert_eq!(status, 201, "{view}");
    let id = view["id"].as_str().expect("schedule id").to_owned();
    let runs_on = |url: &str| -> Vec<Value> {
        let (status, page) = request(
            "GET",
            &format!("{url}/api/runs?limit=500"),
            Some(token("ta")),
            "",
        );
        assert_eq!(status, 200, "{page}");
        let mut runs: Vec<Value> = page["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .filter(|r| r["schedule"]["id"] == id.as_str())
            .cloned()
            .collect();
        runs.sort_by_key(|r| r["submitted_ms"].as_u64());
        runs
    };
    let ended = |run: &Value| {
        !["running", "paused", "stopping"].contains(&run["status"].as_str().unwrap_or_default())
    };
    let wait = |url: &str, what: &str, done: &dyn Fn(&[Value]) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let runs = runs_on(url);
            if done(&runs) {
                return runs;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {runs:?}\n{}\n{}",
                fleet.log_text("serve-0"),
                fleet.log_text("serve-1")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let before = wait(
        &url,
        "two scheduled runs ended on the first plane",
        &|runs| runs.iter().filter(|r| ended(r)).count() >= 2,
    );
    first.kill_hard();
    let url = fleet.leading(1, Duration::from_secs(120));
    let (status, read) = request(
        "GET",
        &format!("{url}/api/schedules/{id}"),
        Some(token("ta")),
        "",
    );
    assert_eq!(status, 200, "the new leader has the schedule: {read}");
    let runs = wait(&url, "two more runs started by the new leader", &|runs| {
        runs.len() >= before.len() + 2 && runs.iter().filter(|r| ended(r)).count() > before.len()
    });
    // One run per start, never two at once: each run was submitted after
    // the one before it ended, and starts are an interval apart.
    for pair in runs.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let gap = b["submitted_ms"].as_u64().expect("submitted")
            - a["submitted_ms"].as_u64().expect("submitted");
        assert!(
            gap >= EVERY_MS - 1_000,
            "two starts {gap} ms apart: {pair:?}"
        );
        if let Some(end) = a["finished_ms"].as_u64() {
            assert!(
                b["submitted_ms"].as_u64().expect("submitted") >= end,
                "a run started while the one before it went on: {pair:?}"
            );
        }
    }
    let ids: BTreeSet<&str> = runs.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), runs.len(), "each run once: {runs:?}");
}
