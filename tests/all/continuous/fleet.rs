//! A continuous run on a fleet, on the real broker: a control plane and a
//! `weir fleet` worker. The worker's pipeline process killed (-9) is
//! started again by the worker; the run's own process killed is started
//! again by the control plane; the leading control plane killed, the
//! standby takes the run over; nothing is lost, and a stop through the API
//! ends it.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_tests::{Proc, kafka_bootstrap, plugins_dir};

use super::{LONG, WEIR, children, contiguous, cursor_in, kill_9};
use crate::operations::{logged_address, request};

const TOKEN: &str = "continuous-fleet-tenant";

struct OnFleet {
    dir: tempfile::TempDir,
    plane: Proc,
    worker: Proc,
    url: String,
    /// A second control plane, standing by.
    standby: Option<Proc>,
    /// The tenant's pipeline, named for this test alone: connector state
    /// on a cluster is kept per tenant and pipeline, past any one fleet.
    pipeline: String,
}

impl OnFleet {
    /// A control plane and a worker, with a standby plane if `standby`.
    fn start(standby: bool) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("out")).expect("out");
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port()
        };
        let ports = [free(), free()];
        let tag = fastrand::u32(..);
        let pipeline = format!("ta-live-{tag:08x}");
        let operator = |n: usize| {
            let port = ports[n];
            format!(
                r#"
[server]
addr = "127.0.0.1:{port}"
data_dir = "data-{n}"
plugin_dir = {plugins:?}
admin_token_env = "ADMIN_TOKEN"

[fleet]
name = "cfleet{tag:08x}"
token_env = "FLEET_TOKEN"
control = ["http://127.0.0.1:{p0}", "http://127.0.0.1:{p1}"]
partitions = 4
pairs = 1
work_dir = "fleet-work"
session_timeout = "6s"
retire_after = "40s"
kafka = {{ bootstrap_servers = {bootstrap:?}, heartbeat_interval = "500ms", consumer = {{ "session.timeout.ms" = "6000", "heartbeat.interval.ms" = "1000" }} }}

[[tenants]]
name = "ta"
token_env = "TENANT_TOKEN"
pipelines = ["{pipeline}"]
plugins = ["test_connector.wasm", "test_indexer.wasm"]
dirs = ["out"]
fleet_pairs = 2
"#,
                plugins = plugins_dir().display().to_string(),
                p0 = ports[0],
                p1 = ports[1],
                bootstrap = kafka_bootstrap(),
            )
        };
        for n in 0..2 {
            std::fs::write(dir.path().join(format!("operator-{n}.toml")), operator(n))
                .expect("operator file");
        }
        let envs = [
            ("ADMIN_TOKEN", "continuous-fleet-admin".to_owned()),
            ("FLEET_TOKEN", "continuous-fleet-worker".to_owned()),
            ("TENANT_TOKEN", TOKEN.to_owned()),
            ("RUST_LOG", "weir=info".to_owned()),
        ];
        let start = |name: &str, command: &str, n: usize| {
            let config = dir.path().join(format!("operator-{n}.toml"));
            Proc::start(
                name,
                Path::new(WEIR),
                &[command, config.to_str().expect("utf-8")],
                &envs,
                &dir.path().join(format!("{name}.log")),
            )
        };
        let mut plane = start("serve", "serve", 0);
        let log = dir.path().join("serve.log");
        assert!(
            plane.wait_for_log(&log, "status page on http://", 1, LONG),
            "{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let text = std::fs::read_to_string(&log).expect("log");
        let url = format!("http://{}", logged_address(&text, "status page on http://"));
        let worker = start("fleet", "fleet", 0);
        let standby = standby.then(|| start("standby", "serve", 1));
        Self {
            dir,
            plane,
            worker,
            url,
            standby,
            pipeline,
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    fn logs(&self) -> String {
        format!(
            "--- serve\n{}\n--- standby\n{}\n--- fleet\n{}",
            self.log("serve"),
            self.log("standby"),
            self.log("fleet")
        )
    }

    fn call(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        request(method, &format!("{}{path}", self.url), Some(TOKEN), body)
    }

    fn indexed(&self) -> Vec<u64> {
        let text = std::fs::read_to_string(self.dir.path().join("out").join("indexed.jsonl"))
            .unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|record| record["n"].as_u64())
            .collect()
    }

    fn wait_indexed(&self, count: usize) {
        let deadline = Instant::now() + LONG;
        while self.indexed().len() < count {
            assert!(
                Instant::now() < deadline,
                "{count} documents were not indexed\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The one process `parent` has running `command`, once there is one
    /// that is not `not`.
    fn process(&self, parent: u32, command: &str, not: Option<u32>) -> u32 {
        let deadline = Instant::now() + LONG;
        loop {
            if let [one] = children(parent, command).as_slice()
                && Some(*one) != not
            {
                return *one;
            }
            assert!(
                Instant::now() < deadline,
                "no new {command} process\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn run(&self, id: &str) -> Value {
        self.call("GET", &format!("/api/runs/{id}"), "").1
    }
}

#[test]
fn a_continuous_fleet_runs_killed_processes_start_again_and_nothing_is_lost() {
    let fleet = OnFleet::start(false);
    let out = fleet.dir.path().join("out").display().to_string();
    let config = continuous_config(&out, &fleet.pipeline);
    let (status, run) = fleet.call("POST", "/api/runs", &config);
    assert_eq!(status, 201, "{run}\n{}", fleet.logs());
    let id = run["id"].as_str().expect("id").to_owned();
    fleet.wait_indexed(200);

    // The worker's pipeline process: started again by the worker.
    let worker = fleet.worker.child.id();
    let pipeline = fleet.process(worker, "fleet-pipeline", None);
    kill_9(pipeline);
    fleet.process(worker, "fleet-pipeline", Some(pipeline));
    let at_kill = fleet.indexed().len();
    fleet.wait_indexed(at_kill + 200);
    assert!(
        fleet
            .log("fleet")
            .contains("the pipeline's process ended; starting it again"),
        "{}",
        fleet.logs()
    );

    // The run's own process: started again by the control plane.
    let plane = fleet.plane.child.id();
    let runner = fleet.process(plane, "serve-run", None);
    kill_9(runner);
    let deadline = Instant::now() + LONG;
    while fleet.run(&id)["service"]["restarts"].as_u64() != Some(1) {
        assert!(Instant::now() < deadline, "not restarted\n{}", fleet.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    fleet.process(plane, "serve-run", Some(runner));
    let at_kill = fleet.indexed().len();
    fleet.wait_indexed(at_kill + 200);

    let (status, stopping) = fleet.call("POST", &format!("/api/runs/{id}/stop"), "");
    assert_eq!(status, 200, "{stopping}");
    let deadline = Instant::now() + LONG;
    let ended = loop {
        let run = fleet.run(&id);
        if !["running", "paused", "stopping", "restarting"]
            .contains(&run["status"].as_str().unwrap_or_default())
        {
            break run;
        }
        assert!(
            Instant::now() < deadline,
            "not stopped: {run}\n{}",
            fleet.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ended["status"], "interrupted", "{ended}\n{}", fleet.logs());
    // Every document before the cursor its state keeps is indexed.
    let (status, state) = fleet.call("GET", &format!("/api/runs/{id}/state"), "");
    assert_eq!(status, 200, "{state}");
    let cursor = cursor_in(&state).unwrap_or_else(|| panic!("no cursor kept: {state}"));
    let indexed = fleet.indexed();
    let done: Vec<u64> = indexed.iter().copied().filter(|&n| n < cursor).collect();
    let last = contiguous(&done, 0).unwrap_or_else(|e| panic!("{e}\n{}", fleet.logs()));
    assert_eq!(last + 1, cursor, "every document before the cursor indexed");
    let distinct: BTreeSet<u64> = indexed.iter().copied().collect();
    eprintln!(
        "fleet: doc-0 to doc-{last} indexed, {} records, {} duplicates over 2 kills",
        indexed.len(),
        indexed.len() - distinct.len()
    );
}

/// The config of a continuous run of `pipeline` recording into `out`.
fn continuous_config(out: &str, pipeline: &str) -> String {
    format!(
        r#"
[runner]
grace_period = "120s"
liveness_timeout = "120s"
report_every = "1s"
[indexer]
batch_size = 50
batch_timeout = "20ms"
plugin = {{ path = "test_indexer.wasm", config = {{ record = "/out/indexed.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
[[connectors]]
name = "source"
pipeline = "{pipeline}"
continuous = true
plugin = {{ path = "test_connector.wasm", config = {{ forever = true, rate = 300.0 }} }}
[[pipelines]]
name = "{pipeline}"
"#
    )
}

#[test]
fn a_continuous_fleet_run_taken_over_by_the_standby_goes_on_from_its_state() {
    let mut fleet = OnFleet::start(true);
    let out = fleet.dir.path().join("out").display().to_string();
    let (status, run) = fleet.call(
        "POST",
        "/api/runs",
        &continuous_config(&out, &fleet.pipeline),
    );
    assert_eq!(status, 201, "{run}\n{}", fleet.logs());
    let id = run["id"].as_str().expect("id").to_owned();
    fleet.wait_indexed(200);
    let kept = |fleet: &OnFleet| {
        let (status, state) = fleet.call("GET", &format!("/api/runs/{id}/state"), "");
        assert_eq!(status, 200, "{state}");
        cursor_in(&state).unwrap_or_else(|| panic!("no cursor kept: {state}"))
    };
    let before = kept(&fleet);
    // The leading control plane dies; the standby leads and takes the run
    // over: a fresh runner of it, from its committed state.
    fleet.plane.kill_hard();
    let log = fleet.dir.path().join("standby.log");
    let standby = fleet.standby.as_mut().expect("a standby");
    assert!(
        standby.wait_for_log(&log, "status page on http://", 1, LONG),
        "the standby did not lead\n{}",
        fleet.logs()
    );
    let text = std::fs::read_to_string(&log).expect("log");
    fleet.url = format!("http://{}", logged_address(&text, "status page on http://"));
    let at_takeover = fleet.indexed().len();
    fleet.wait_indexed(at_takeover + 200);
    let run = fleet.run(&id);
    assert_eq!(run["status"], "running", "{run}\n{}", fleet.logs());

    let (status, stopping) = fleet.call("POST", &format!("/api/runs/{id}/stop"), "");
    assert_eq!(status, 200, "{stopping}");
    let deadline = Instant::now() + LONG;
    let ended = loop {
        let run = fleet.run(&id);
        if !["running", "paused", "stopping", "restarting"]
            .contains(&run["status"].as_str().unwrap_or_default())
        {
            break run;
        }
        assert!(
            Instant::now() < deadline,
            "not stopped: {run}\n{}",
            fleet.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ended["status"], "interrupted", "{ended}\n{}", fleet.logs());
    // The dead plane's runner died with it (a fleet's run process exits at
    // once): what it published after its last committed state is sent
    // again by the next runner, from the state's cursor. Nothing before
    // the cursor the last runner committed is missing.
    let cursor = kept(&fleet);
    let indexed = fleet.indexed();
    let done: Vec<u64> = indexed.iter().copied().filter(|&n| n < cursor).collect();
    let last = contiguous(&done, 0).unwrap_or_else(|e| panic!("{e}\n{}", fleet.logs()));
    assert_eq!(
        last + 1,
        cursor,
        "every document before the cursor ({cursor}) indexed"
    );
    assert!(
        cursor > before,
        "the taken-over run went on: cursor {before}, then {cursor}"
    );
    let distinct: BTreeSet<u64> = indexed.iter().copied().collect();
    eprintln!(
        "fleet take-over: doc-0 to doc-{last} indexed before the kept cursor, {} records, {} duplicates",
        indexed.len(),
        indexed.len() - distinct.len()
    );
}
