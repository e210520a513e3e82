//! A run submitted through `weir serve`'s API against the same run made
//! as `weir run` makes it, in one process and one benchmark run.
//!
//! Both: generated documents -> trim-whitespace -> nop-indexer, 2 workers.
//! `run`: a [`Runner`] validates and runs the config (what `weir run`
//! does). `api`: the control plane (its HTTP server, store and throughput
//! sampler in this process) gets the config by `POST /api/runs`; the
//! client polls `GET /api/runs/{id}` every 100 ms until the run has ended.
//! Each phase is timed from the start of validation to the end of the run
//! (for the API, the server's time of the end), with the process's CPU
//! time, polling included; rounds alternate the order of the phases, and
//! the medians are reported, with their ratio.
//!
//! `cargo bench -p weir-tests --bench control_plane` (WEIR_BENCH_DOCS,
//! default 200,000; WEIR_BENCH_ROUNDS, default 3).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::control::ControlPlane;
use weir::control::isolate::Isolation;
use weir::control::operator::OperatorConfig;
use weir::messenger::LocalMessengers;
use weir::plugin::{PluginRuntime, RuntimeOptions};
use weir::run::{RunStatus, Runner};

#[path = "common/measure.rs"]
mod measure;
use measure::{env_number, median_of as median, process_cpu_seconds};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TOKEN: &str = "bench-token";

/// The run's config; plugin paths relative to the plugin directory.
fn config(n: usize) -> String {
    format!(
        r#"
[worker]
threads = 2
[[connectors]]
name = "gen"
pipeline = "bench"
plugin = {{ path = "generator_connector.wasm", config = {{ count = {n}, fields = {{ title = "  a title to trim  ", body = "lorem ipsum dolor sit amet" }} }} }}
[[pipelines]]
name = "bench"
stages = [{{ name = "trim", plugin = {{ path = "trim_whitespace.wasm", config = {{ fields = ["title"] }} }} }}]
[indexer]
batch_size = 500
plugin = {{ path = "nop_indexer.wasm" }}
"#
    )
}

/// As `weir run`: documents indexed, wall and CPU seconds.
fn direct(text: &str, plugins: &Path) -> (u64, f64, f64) {
    let (start, cpu) = (Instant::now(), process_cpu_seconds());
    let config = weir::config::Config::parse(text, plugins, std::iter::empty()).expect("config");
    let runtime = PluginRuntime::new(RuntimeOptions::default()).expect("runtime");
    let messengers = Arc::new(LocalMessengers {
        capacity: config.publisher.queue_capacity,
        max_bytes: config.publisher.queue_max_bytes(),
    });
    let runner = Runner::new(config, runtime, messengers);
    let plugins = runner.validate().expect("valid config");
    let result = runner.run_validated(&plugins, &weir::run::new_run_id());
    let timed = (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    (result.connectors[0].succeeded, timed.0, timed.1)
}

/// Through the API of a control plane served at `url`.
fn api(text: &str, url: &str) -> (u64, f64, f64) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let call = |method: &str, path: &str, body: &str| -> serde_json::Value {
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{url}{path}"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(body.to_owned())
            .expect("request");
        let mut response = agent.run(request).expect("the API answers");
        let text = response.body_mut().read_to_string().expect("body");
        serde_json::from_str(&text).expect("JSON")
    };
    let (start, cpu) = (now_ms(), process_cpu_seconds());
    let run = call("POST", "/api/runs", text);
    let id = run["id"]
        .as_str()
        .unwrap_or_else(|| panic!("not submitted: {run}"))
        .to_owned();
    let done = loop {
        let run = call("GET", &format!("/api/runs/{id}"), "");
        if !["running", "paused", "stopping"].contains(&run["status"].as_str().unwrap_or("")) {
            break run;
        }
        // A client polling as a dashboard does; the wall time is the
        // server's (when the run finished), not when the poll saw it.
        std::thread::sleep(Duration::from_millis(100));
    };
    let cpu = process_cpu_seconds() - cpu;
    let finished = done["finished_ms"].as_u64().expect("finished");
    let timed = ((finished.saturating_sub(start)) as f64 / 1000.0, cpu);
    assert_eq!(done["status"], "success", "{done}");
    (
        done["counts"]["indexed"].as_u64().unwrap_or(0),
        timed.0,
        timed.1,
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = env_number("WEIR_BENCH_DOCS", 200_000);
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let plugins = weir_tests::plugins_dir();
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = format!(
        r#"
[server]
data_dir = "data"
plugin_dir = {plugins:?}
[[tenants]]
name = "bench"
token_env = "WEIR_BENCH_TOKEN"
pipelines = ["bench"]
plugins = ["generator_connector.wasm", "trim_whitespace.wasm", "nop_indexer.wasm"]
max_concurrent_runs = 1
"#,
        plugins = plugins.display().to_string()
    );
    let path = dir.path().join("operator.toml");
    std::fs::write(&path, operator).expect("operator config");
    // SAFETY: no other thread runs yet.
    unsafe { std::env::set_var("WEIR_BENCH_TOKEN", TOKEN) };
    // In this process, as the run it is compared with.
    let plane = ControlPlane::new(
        OperatorConfig::load(&path).expect("operator config"),
        Isolation::Thread,
    )
    .expect("control plane");
    let server =
        weir::http::HttpServer::start("127.0.0.1:0", weir::control::routes(Arc::clone(&plane)))
            .expect("server");
    let url = format!("http://{}", server.addr());
    let text = config(n);
    println!(
        "{n} generated documents -> trim -> nop, 2 workers; `weir run` against `weir serve`'s API"
    );
    let (mut runs, mut apis) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on a warmer machine.
        let order = if round % 2 == 0 {
            ["run", "api"]
        } else {
            ["api", "run"]
        };
        for phase in order {
            let (docs, seconds, cpu) = match phase {
                "run" => direct(&text, plugins),
                _ => api(&text, &url),
            };
            assert_eq!(docs, n as u64, "{phase} indexed every document");
            let (rate, cpu_us) = (docs as f64 / seconds, cpu * 1e6 / docs as f64);
            println!(
                "round {round}: {phase:<4} {rate:>9.0} docs/s ({seconds:.2} s), {cpu_us:.2} us CPU per document"
            );
            if phase == "run" {
                runs.push((rate, cpu_us));
            } else {
                apis.push((rate, cpu_us));
            }
        }
    }
    let rate = |v: &[(f64, f64)]| median(v.iter().map(|r| r.0).collect());
    let cpu = |v: &[(f64, f64)]| median(v.iter().map(|r| r.1).collect());
    println!();
    println!("median of {rounds} rounds:        docs/s   CPU us/doc");
    println!(
        "  weir run                  {:>9.0} {:>10.2}",
        rate(&runs),
        cpu(&runs)
    );
    println!(
        "  weir serve API            {:>9.0} {:>10.2}",
        rate(&apis),
        cpu(&apis)
    );
    println!(
        "  api / run                 {:>9.3} {:>10.3}",
        rate(&apis) / rate(&runs),
        cpu(&apis) / cpu(&runs)
    );
    drop(server);
    plane.shut_down();
}
