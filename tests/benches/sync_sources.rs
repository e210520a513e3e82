//! What incremental sync and the S3 connector cost through the `weir`
//! binary, against baselines measured in the same run.
//!
//! - `state`: the file connector reading JSON lines -> nop indexer, 2
//!   worker threads. `plain` keeps no state; `first sync` is the same with
//!   `incremental = true` from empty state (each record fingerprinted, its
//!   state set, and committed once its document is done: a SQLite file);
//!   `no change` runs that again on the same file, so nothing is sent and
//!   every record is only compared with its state. The cost of the state per
//!   document is `first sync` minus `plain`.
//! - `s3`: the s3-connector listing and fetching every object of a bucket
//!   on the test server (S3Proxy, `tests/storage/`) -> nop indexer, against
//!   a native client (`ureq`, SigV4 with the connector's own code) listing
//!   (1,000 keys a page) and fetching the same objects one after the other
//!   on one thread, as the connector does. The server's own CPU is in
//!   neither figure.
//!
//! - `sql`: the sql-connector reading every row of a table of PostgreSQL
//!   (`tests/storage/postgres.sh`, Debian's package) through the host's
//!   `sql` interface (a read-only cursor, 1,000 rows a page) -> nop
//!   indexer, against a native client (the `postgres` crate) reading the
//!   same query's rows and each of their values on one thread. The
//!   server's own CPU is in neither figure.
//!
//! - `folder`: the file connector walking a folder of 100,000 small files
//!   -> nop indexer: a full sync, then a run after 1% of the files changed
//!   (the goal: at most 0.1x the full run's CPU), one with no change, and
//!   `--full` with the state kept (`common/folder.rs`).
//!
//! Wall and CPU (user + system, every thread) of the whole `weir` process,
//! from outside; the native client's wall and this process's CPU.
//!
//! `WEIR_BIN=target/release/weir cargo bench -p weir-tests --bench sync_sources`
//! (`WEIR_BENCH_ROUNDS`, default 3, medians; `WEIR_BENCH_SCALE`, default 1,
//! multiplies the record and object counts; `WEIR_S3_URL` for a running server;
//! `WEIR_BENCH_ONLY=state,s3,sql,folder` runs only those parts).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[path = "common/folder.rs"]
mod folder;
#[path = "common/measure.rs"]
mod measure;
#[path = "common/process.rs"]
mod process;
#[path = "common/summary.rs"]
mod summary;
use measure::{env_number, median_of, process_cpu_seconds};
use weir_tests::s3::{ACCESS_KEY, Client, SECRET_KEY};

fn main() {
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let scale = env_number("WEIR_BENCH_SCALE", 1).max(1);
    let weir = PathBuf::from(std::env::var("WEIR_BIN").unwrap_or_else(|_| {
        panic!("set WEIR_BIN to a release `weir` binary (cargo build --release -p weir)")
    }));
    let dist = weir_tests::plugins_dir().to_owned();
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path();
    let mut report = String::new();
    let only = std::env::var("WEIR_BENCH_ONLY").unwrap_or_default();
    let runs = |part: &str| only.is_empty() || only.split(',').any(|p| p.trim() == part);
    if runs("state") {
        state_cost(&mut report, &weir, &dist, dir, rounds, 200_000 * scale);
    }
    if runs("s3") {
        s3_cost(&mut report, &weir, &dist, dir, rounds, 2_000 * scale);
    }
    if runs("sql") {
        sql_cost(&mut report, &weir, &dist, dir, rounds, 200_000 * scale);
    }
    if runs("folder") {
        folder::folder_cost(&mut report, &weir, &dist, dir, rounds, 100_000 * scale);
    }
    println!("{report}");
}

fn plugin(dist: &Path, name: &str) -> String {
    format!("{:?}", dist.join(name).display().to_string())
}

/// A run of `connector` (a `plugin = {...}` table) into the nop indexer.
fn config(dir: &Path, dist: &Path, name: &str, connector: &str) -> PathBuf {
    let text = format!(
        r#"
        [runner]
        cache_dir = {cache:?}
        [worker]
        threads = 2
        [state]
        path = "{name}.sqlite"
        [indexer]
        plugin = {{ path = {nop} }}
        [[connectors]]
        name = "bench"
        pipeline = "p"
        plugin = {connector}
        [[pipelines]]
        name = "p"
        stages = []
        "#,
        cache = dir.join("cache").display().to_string(),
        nop = plugin(dist, "nop_indexer.wasm"),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("config");
    path
}

fn run(weir: &Path, config: &Path) -> process::Usage {
    process::timed(
        Command::new(weir)
            .args(["run", "--no-progress"])
            .arg(config),
    )
}

/// Medians over `rounds` of the `weir` run of `config` and of `native`
/// (its wall and CPU seconds), one after the other in each round.
struct Against {
    weir_wall: f64,
    weir_cpu: f64,
    /// CPU of the thread that ran the connector, from the run's summary.
    connector_cpu: f64,
    native_wall: f64,
    native_cpu: f64,
}

fn against_native(
    weir: &Path,
    config: &Path,
    rounds: usize,
    mut native: impl FnMut() -> (f64, f64),
) -> Against {
    run(weir, config);
    native();
    let mut all: [Vec<f64>; 5] = Default::default();
    for _ in 0..rounds {
        let usage = run(weir, config);
        let connector = summary::parse(&usage.stdout).connectors.as_secs_f64();
        let (wall, cpu) = native();
        for (list, value) in all
            .iter_mut()
            .zip([usage.wall, usage.cpu, connector, wall, cpu])
        {
            list.push(value);
        }
    }
    let [ww, wc, cc, nw, nc] = all.map(median_of);
    Against {
        weir_wall: ww,
        weir_cpu: wc,
        connector_cpu: cc,
        native_wall: nw,
        native_cpu: nc,
    }
}

/// The table of an [`Against`] of `n` items.
fn report_against(
    report: &mut String,
    n: usize,
    what: &str,
    weir_name: &str,
    native_name: &str,
    a: &Against,
) {
    let per = |s: f64| s * 1e6 / n as f64;
    let _ = writeln!(
        report,
        "| client | wall | {what}/s | CPU (whole process) | CPU per item | connector thread's CPU per item |"
    );
    let _ = writeln!(report, "| --- | --- | --- | --- | --- | --- |");
    let _ = writeln!(
        report,
        "| {weir_name} | {:.2} s | {:.0} | {:.2} s | {:.2} µs | {:.2} µs |",
        a.weir_wall,
        n as f64 / a.weir_wall,
        a.weir_cpu,
        per(a.weir_cpu),
        per(a.connector_cpu)
    );
    let _ = writeln!(
        report,
        "| {native_name} | {:.2} s | {:.0} | {:.2} s | {:.2} µs | |",
        a.native_wall,
        n as f64 / a.native_wall,
        a.native_cpu,
        per(a.native_cpu)
    );
    let _ = writeln!(
        report,
        "weir/native: {:.2}x the {what} per second, {:.2}x the CPU per item ({:.2}x counting the connector's thread alone)",
        a.native_wall / a.weir_wall,
        a.weir_cpu / a.native_cpu,
        a.connector_cpu / a.native_cpu
    );
}

fn state_cost(report: &mut String, weir: &Path, dist: &Path, dir: &Path, rounds: usize, n: usize) {
    let lines: String = (0..n)
        .map(|i| format!("{{\"id\":\"r{i:08}\",\"title\":\"record number {i}\",\"n\":{i}}}\n"))
        .collect();
    std::fs::write(dir.join("records.jsonl"), lines).expect("records");
    let files = |incremental: bool| {
        format!(
            r#"{{ path = {}, config = {{ paths = ["/work/records.jsonl"], incremental = {incremental} }}, grants = {{ dirs = [{{ host = {:?}, guest = "/work" }}] }} }}"#,
            plugin(dist, "file_connector.wasm"),
            dir.display().to_string()
        )
    };
    let plain = config(dir, dist, "plain", &files(false));
    let synced = config(dir, dist, "synced", &files(true));
    // Compile the components once, outside the timings.
    run(weir, &plain);
    let (mut p, mut f, mut u) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        p.push(run(weir, &plain));
        let _ = std::fs::remove_file(dir.join("synced.sqlite"));
        f.push(run(weir, &synced));
        u.push(run(weir, &synced));
    }
    let med = |runs: &[process::Usage], pick: fn(&process::Usage) -> f64| {
        median_of(runs.iter().map(pick).collect())
    };
    let us = |s: f64| s * 1e6 / n as f64;
    let (pw, pc) = (med(&p, |r| r.wall), med(&p, |r| r.cpu));
    let (fw, fc) = (med(&f, |r| r.wall), med(&f, |r| r.cpu));
    let (uw, uc) = (med(&u, |r| r.wall), med(&u, |r| r.cpu));
    let _ = writeln!(
        report,
        "state: {n} records, {rounds} rounds, medians (weir process: wall, CPU, CPU per record)"
    );
    let _ = writeln!(report, "| run | wall | CPU | CPU/record | vs plain (CPU) |");
    let _ = writeln!(report, "| --- | --- | --- | --- | --- |");
    for (name, w, c) in [
        ("plain", pw, pc),
        ("first sync", fw, fc),
        ("no change", uw, uc),
    ] {
        let _ = writeln!(
            report,
            "| {name} | {w:.2} s | {c:.2} s | {:.2} µs | {:.2}x |",
            us(c),
            c / pc
        );
    }
    let _ = writeln!(
        report,
        "state kept and committed: {:.2} µs of CPU per record ({:.2} µs of wall)\n",
        us(fc - pc),
        us(fw - pw)
    );
}

fn s3_cost(report: &mut String, weir: &Path, dist: &Path, dir: &Path, rounds: usize, n: usize) {
    let url = weir_tests::s3_url();
    let client = Client::new(url);
    let bucket = format!("bench-{:08x}", fastrand::u32(..));
    client.create_bucket(&bucket);
    let body: Vec<u8> = (0..2048).map(|i| b'a' + (i % 26) as u8).collect();
    for i in 0..n {
        client.put(&bucket, &format!("docs/{i:07}.txt"), &body);
    }
    let connector = format!(
        r#"{{ path = {}, config = {{ endpoint = "{url}", bucket = "{bucket}", prefix = "docs/", content = "text", incremental = false }}, grants = {{ http = {}, env = {{ AWS_ACCESS_KEY_ID = "{ACCESS_KEY}", AWS_SECRET_ACCESS_KEY = "{SECRET_KEY}" }} }} }}"#,
        plugin(dist, "s3_connector.wasm"),
        weir_tests::http_grants(url)
    );
    let s3 = config(dir, dist, "s3", &connector);
    let native = || {
        let (start, cpu) = (Instant::now(), process_cpu_seconds());
        let keys = client.keys(&bucket, "docs/", 1000);
        let bytes: usize = keys.iter().map(|k| client.get(&bucket, k).len()).sum();
        assert_eq!(
            (keys.len(), bytes),
            (n, n * body.len()),
            "every object fetched"
        );
        (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu)
    };
    let a = against_native(weir, &s3, rounds, native);
    let _ = writeln!(
        report,
        "s3: {n} objects of {} bytes, {rounds} rounds, medians",
        body.len()
    );
    report_against(
        report,
        n,
        "objects",
        "weir s3-connector -> nop",
        "native (ureq, one thread)",
        &a,
    );
}

fn sql_cost(report: &mut String, weir: &Path, dist: &Path, dir: &Path, rounds: usize, n: usize) {
    let mut client = postgres::Client::connect(weir_tests::postgres_url(), postgres::NoTls)
        .expect("connect to the test PostgreSQL");
    let table = format!("bench_{:08x}", fastrand::u32(..));
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id bigint PRIMARY KEY, title text NOT NULL, n integer NOT NULL, \
             updated_at timestamptz NOT NULL);
             INSERT INTO {table} SELECT i, 'record number ' || i, i % 1000, \
             timestamptz '2026-01-01 00:00:00+00' + i * interval '1 second' FROM generate_series(1, {n}) AS i;
             ANALYZE {table};"
        ))
        .expect("table");
    let query = format!("SELECT * FROM {table}");
    let connector = format!(
        r#"{{ path = {}, config = {{ query = "{query}", id_column = "id" }}, grants = {{ sql = {{ main = "{}" }} }} }}"#,
        plugin(dist, "sql_connector.wasm"),
        weir_tests::postgres_settings()
    );
    let sql = config(dir, dist, "sql", &connector);
    let native = || {
        let (start, cpu) = (Instant::now(), process_cpu_seconds());
        let mut rows = 0usize;
        let mut bytes = 0usize;
        let mut transaction = client.transaction().expect("transaction");
        let portal = transaction.bind(query.as_str(), &[]).expect("portal");
        loop {
            let page = transaction.query_portal(&portal, 1000).expect("page");
            if page.is_empty() {
                break;
            }
            for row in &page {
                let id: i64 = row.get(0);
                let title: &str = row.get(1);
                let n: i32 = row.get(2);
                let at: std::time::SystemTime = row.get(3);
                bytes += title.len() + usize::from(id >= 0) + usize::from(n >= 0);
                std::hint::black_box(at);
                rows += 1;
            }
        }
        transaction.commit().expect("commit");
        assert_eq!(rows, n, "every row read ({bytes} bytes of titles)");
        (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu)
    };
    let a = against_native(weir, &sql, rounds, native);
    let _ = writeln!(
        report,
        "\nsql: {n} rows of 4 columns, {rounds} rounds, medians"
    );
    report_against(
        report,
        n,
        "rows",
        "weir sql-connector -> nop",
        "native (postgres crate, one thread)",
        &a,
    );
}
