//! The push endpoint through the `weir serve` binary: how many lines a
//! second it accepts at most, then its accept latency at half that rate.
//!
//! - The server: the release binary as a process (`weir serve`, each run in
//!   a process of its own, the default), one tenant whose push bounds and
//!   request rate are out of the way. Its run: the kafka-connector on a
//!   `grants.push` source (a buffer of 100,000 lines) -> no stage ->
//!   nop-indexer, 2 worker threads.
//! - Documents of about 200 bytes, `WEIR_PUSH_BATCH` (default 100) lines a
//!   request, each request a real HTTP POST (ureq, kept-alive connections).
//! - **Max accept rate**: `WEIR_PUSH_CLIENTS` (default 4) clients post as
//!   fast as they are answered for `WEIR_PUSH_SECONDS` (default 10 s):
//!   lines accepted (202) per second of wall time; 429s are counted apart.
//! - **Latency at half that rate**: the same clients send on a fixed
//!   timetable at half the max rate, open loop, for as long; each
//!   request's latency is from when it was due to when its 202 came
//!   (a late send counts as latency: no coordinated omission). p50, p99,
//!   max. The goal: p99 <= 50 ms.
//!
//! `WEIR_BIN=target/release/weir cargo bench -p weir-tests --bench push_accept`

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "common/measure.rs"]
mod measure;

use measure::env_number;

const TOKEN: &str = "bench-push-token-0123456789";

fn main() {
    let weir = PathBuf::from(std::env::var("WEIR_BIN").unwrap_or_else(|_| {
        panic!("set WEIR_BIN to a release `weir` binary (cargo build --release -p weir)")
    }));
    let batch = env_number("WEIR_PUSH_BATCH", 100).max(1);
    let clients = env_number("WEIR_PUSH_CLIENTS", 4).max(1);
    let seconds = env_number("WEIR_PUSH_SECONDS", 10).max(1) as u64;
    let work = tempfile::tempdir().expect("tempdir");
    let (mut server, url) = serve(&weir, work.path());
    let run = submit(&url);
    let bodies: Vec<String> = (0..clients).map(|c| body(c, batch)).collect();
    wait_for_source(&url, &run, &bodies[0]);

    // Closed loop: as fast as answered.
    let accepted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (url, run, body) = (url.clone(), run.clone(), bodies[c].clone());
            let (accepted, refused, stop) = (
                Arc::clone(&accepted),
                Arc::clone(&refused),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let agent = agent();
                while !stop.load(Ordering::Relaxed) {
                    match post(&agent, &url, &run, &body) {
                        202 => accepted.fetch_add(batch as u64, Ordering::Relaxed),
                        _ => refused.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("client");
    }
    let wall = started.elapsed().as_secs_f64();
    let max_rate = accepted.load(Ordering::Relaxed) as f64 / wall;
    println!(
        "max accept rate: {max_rate:.0} lines/s ({:.0} requests/s of {batch} lines, {clients} clients, {wall:.1} s; {} refused)",
        max_rate / batch as f64,
        refused.load(Ordering::Relaxed)
    );

    // Open loop at half the rate: each client its share of a timetable.
    let per_second = (max_rate / 2.0 / batch as f64).max(1.0);
    let interval = Duration::from_secs_f64(clients as f64 / per_second);
    let begin = Instant::now() + Duration::from_millis(100);
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (url, run, body) = (url.clone(), run.clone(), bodies[c].clone());
            std::thread::spawn(move || {
                let agent = agent();
                let mut latencies = Vec::new();
                let offset = interval.mul_f64(c as f64 / clients as f64);
                for n in 0_u32.. {
                    let due = begin + offset + interval * n;
                    if due > begin + Duration::from_secs(seconds) {
                        break;
                    }
                    // The timetable is the load, not a synchronisation.
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let status = post(&agent, &url, &run, &body);
                    latencies.push((status, due.elapsed()));
                }
                latencies
            })
        })
        .collect();
    let mut all: Vec<(u16, Duration)> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("client"))
        .collect();
    let refused = all.iter().filter(|(status, _)| *status != 202).count();
    all.sort_by_key(|(_, latency)| *latency);
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)].1;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "at half the max ({:.0} lines/s, {:.0} requests/s): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} requests ({refused} not 202); goal p99 <= 50 ms",
        per_second * batch as f64,
        per_second,
        ms(at(0.50)),
        ms(at(0.99)),
        ms(all.last().map_or(Duration::ZERO, |l| l.1)),
        all.len()
    );
    let _ = server.kill();
    let _ = server.wait();
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

fn post(agent: &ureq::Agent, url: &str, run: &str, body: &str) -> u16 {
    agent
        .post(&format!("{url}/api/runs/{run}/documents"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send(body)
        .map_or(0, |mut r| {
            let _ = r.body_mut().read_to_string();
            r.status().as_u16()
        })
}

/// `lines` documents of about 200 bytes for client `client`.
fn body(client: usize, lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "{{\"id\":\"c{client}-{i}\",\"title\":\"A pushed document {i}\",\"body\":\"{}\",\"n\":{i}}}\n",
                "lorem ipsum dolor sit amet ".repeat(5)
            )
        })
        .collect()
}

/// `weir serve` on a free port: the process and its URL (the caller
/// kills it and waits for it).
#[allow(clippy::zombie_processes)]
fn serve(weir: &Path, dir: &Path) -> (Child, String) {
    let operator = format!(
        r#"
[server]
addr = "127.0.0.1:0"
data_dir = "data"
plugin_dir = {plugins:?}
admin_token_env = "BENCH_ADMIN_TOKEN"
requests_per_second = 1000000
request_burst = 1000000

[[tenants]]
name = "bench"
token_env = "BENCH_PUSH_TOKEN"
pipelines = ["pushed"]
plugins = ["kafka_connector.wasm", "nop_indexer.wasm"]
push = {{ max_body_mib = 64, lines_per_second = 100000000, max_buffer = 1000000 }}
"#,
        plugins = weir_tests::plugins_dir().display().to_string()
    );
    std::fs::write(dir.join("operator.toml"), operator).expect("operator");
    let log = dir.join("serve.log");
    let mut child = Command::new(weir)
        .args(["serve", &dir.join("operator.toml").display().to_string()])
        .env("BENCH_PUSH_TOKEN", TOKEN)
        .env("BENCH_ADMIN_TOKEN", "bench-admin")
        .env("RUST_LOG", "weir=warn,weir::cli=info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("weir serve starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("status page on http://").nth(1) {
            let addr = rest.split(['/', ' ', '\n']).next().unwrap_or_default();
            return (child, format!("http://{addr}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weir serve did not start:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pushed-to run: its id.
fn submit(url: &str) -> String {
    let config = r#"
[worker]
threads = 2
[[connectors]]
name = "push"
pipeline = "pushed"
plugin = { path = "kafka_connector.wasm", config = { source = "docs", id_field = "id", metadata_field = "", batch = 4096, wait_ms = 1000 }, grants = { push = { docs = { buffer = 100000 } } } }
[[pipelines]]
name = "pushed"
stages = []
[indexer]
batch_size = 1000
batch_timeout = "5ms"
plugin = { path = "nop_indexer.wasm" }
"#;
    let mut response = agent()
        .post(&format!("{url}/api/runs"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send(config)
        .expect("submitted");
    let text = response.body_mut().read_to_string().expect("answer");
    assert_eq!(response.status().as_u16(), 201, "{text}");
    let run: serde_json::Value = serde_json::from_str(&text).expect("json");
    run["id"].as_str().expect("id").to_owned()
}

/// Until the run's connector has opened its push source (409 before).
fn wait_for_source(url: &str, run: &str, body: &str) {
    let agent = agent();
    let deadline = Instant::now() + Duration::from_secs(120);
    while post(&agent, url, run, body) != 202 {
        assert!(Instant::now() < deadline, "the run takes no pushes");
        std::thread::sleep(Duration::from_millis(100));
    }
}
