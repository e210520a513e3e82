//! `weir serve` runs each submitted run in a process of its own: a run
//! whose process dies (killed, out of memory, aborted) is recorded as
//! failed with how it died, its tenant's place in the quota is given back,
//! and the server and the other tenants' runs go on.

use std::time::{Duration, Instant};

use crate::operations::{ACME, Serve, ZETA, generated};

const NOP: &str = r#"{ path = "nop_indexer.wasm" }"#;

/// The `weir serve-run` processes whose parent is `server`.
fn run_processes(server: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent's pid is the second field after the command's `)`.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(server) && cmdline.split(|b| *b == 0).any(|arg| arg == b"serve-run") {
            found.push(pid);
        }
    }
    found
}

/// The one run process of `server`, once there is one.
fn the_run_process(server: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match run_processes(server).as_slice() {
            [one] => return *one,
            found => assert!(Instant::now() < deadline, "not one run process: {found:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_stopped_run_whose_process_is_wedged_is_killed_after_its_grace_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = Serve::start(dir.path());
    let text = format!(
        "[runner]\ngrace_period = \"1s\"\n{}",
        generated("acme-books", 1_000_000, NOP)
    );
    let (status, run) = serve.submit(ACME, &text);
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("id").to_owned();
    let wedged = the_run_process(serve.proc.child.id());
    // SAFETY: kill(2) on a pid this test found as the server's child.
    assert_eq!(
        unsafe { libc::kill(i32::try_from(wedged).expect("pid"), libc::SIGSTOP) },
        0
    );
    let asked = Instant::now();
    let (status, stopping) = serve.call("POST", &format!("/api/runs/{id}/stop"), Some(ACME), "");
    assert_eq!(status, 200, "{stopping}");
    let ended = serve.ended(ACME, &id);
    assert_eq!(ended["status"], "failure", "{ended}");
    let error = ended["error"].as_str().unwrap_or_default();
    assert!(error.contains("signal 9"), "{error}");
    // Its grace period (1 s) and the slack (5 s), not forever.
    assert!(
        asked.elapsed() < Duration::from_secs(30),
        "{:?}",
        asked.elapsed()
    );
}

#[test]
fn a_run_whose_process_dies_fails_alone_and_the_server_and_other_runs_go_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = Serve::start(dir.path());
    let server = serve.proc.child.id();

    // acme's run is long (its quota is 400 documents a second).
    let (status, run) = serve.submit(ACME, &generated("acme-books", 1_000_000, NOP));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("id").to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let doomed = loop {
        match run_processes(server).as_slice() {
            [one] => break *one,
            found => assert!(Instant::now() < deadline, "not one run process: {found:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // A process of its own, in a session of its own, without the tokens.
    let environ = std::fs::read(format!("/proc/{doomed}/environ")).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&environ).contains("TOKEN"),
        "a run's process sees none of the server's environment"
    );

    let (status, calm) = serve.submit(ZETA, &generated("zeta-books", 2_000, NOP));
    assert_eq!(status, 201, "{calm}");
    let calm_id = calm["id"].as_str().expect("id").to_owned();
    // SAFETY: kill(2) on a pid this test found as the server's child.
    assert_eq!(
        unsafe { libc::kill(i32::try_from(doomed).expect("pid"), libc::SIGKILL) },
        0
    );

    let died = serve.ended(ACME, &id);
    assert_eq!(died["status"], "failure", "{died}");
    let error = died["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("process died") && error.contains("signal 9"),
        "{error}"
    );
    let calm = serve.ended(ZETA, &calm_id);
    assert_eq!(calm["status"], "success", "{calm}");
    assert_eq!(calm["counts"]["indexed"], 2000, "{calm}");

    // acme's one place in its quota is back, and its next run runs.
    let (status, again) = serve.submit(ACME, &generated("acme-books", 10, NOP));
    assert_eq!(status, 201, "{again}");
    let again = serve.ended(ACME, again["id"].as_str().expect("id"));
    assert_eq!(again["status"], "success", "{again}");
    assert_eq!(
        serve.call("GET", "/healthz", None, "").0,
        200,
        "the server goes on"
    );
}

#[test]
fn a_run_past_its_memory_bound_fails_without_taking_the_server_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The run's process may map 256 MiB; its stage may grow to 1 GiB, and
    // tries to: the operating system's bound is the one it meets.
    let serve = Serve::start_with(dir.path(), "run_memory_mib = 256");
    let balloon = r#"
[[connectors]]
name = "c"
pipeline = "zeta-books"
plugin = { path = "test_connector.wasm", config = { docs = [
    { id = "balloon", action = "alloc" },
    { id = "after", action = "ok" },
] } }

[[pipelines]]
name = "zeta-books"
stages = [{ name = "hostile", plugin = { path = "hostile_stage.wasm", limits = { memory_mib = 1024 } } }]

[indexer]
plugin = { path = "nop_indexer.wasm" }
"#;
    let (status, run) = serve.submit(ZETA, balloon);
    assert_eq!(status, 201, "{run}");
    let ended = serve.ended(ZETA, run["id"].as_str().expect("id"));
    let id = ended["id"].as_str().expect("id");
    assert_eq!(ended["status"], "partial_success", "{ended}");
    assert_eq!(
        ended["counts"]["indexed"], 1,
        "the next document ran: {ended}"
    );
    // What stopped the balloon was the process's bound, not its own limit.
    let (_, page) = serve.call(
        "GET",
        &format!("/api/runs/{id}/dead-letters"),
        Some(ZETA),
        "",
    );
    let error = page["letters"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("hostile"), "{page}");
    assert!(!error.contains("memory limit of 1024 MiB"), "{error}");
    // The server goes on, and so does the tenant's next run.
    assert_eq!(serve.call("GET", "/healthz", None, "").0, 200);
    let (status, next) = serve.submit(ZETA, &generated("zeta-books", 100, NOP));
    assert_eq!(status, 201, "{next}");
    let next = serve.ended(ZETA, next["id"].as_str().expect("id"));
    assert_eq!(next["status"], "success", "{next}");
}

/// CPU time (user and system) process `pid` has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after `)`.
    let ticks: u64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum())
        .unwrap_or(0);
    // SAFETY: sysconf with a valid name.
    let per_second = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100);
    Duration::from_millis(ticks * 1000 / per_second.max(1))
}

#[test]
fn a_tenants_runs_together_use_at_most_its_cpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = Serve::start_full(dir.path(), "", "cpus = 0.25");
    let spins: Vec<String> = (0..64)
        .map(|i| format!(r#"{{ id = "spin-{i}", action = "loop" }}"#))
        .collect();
    let spin = format!(
        r#"
[worker]
threads = 4
[[connectors]]
name = "c"
pipeline = "zeta-books"
plugin = {{ path = "test_connector.wasm", config = {{ docs = [{}] }} }}
[[pipelines]]
name = "zeta-books"
stages = [{{ name = "spin", plugin = {{ path = "hostile_stage.wasm", limits = {{ call_timeout = "30s" }} }} }}]
[indexer]
plugin = {{ path = "nop_indexer.wasm" }}
"#,
        spins.join(", ")
    );
    let (status, run) = serve.submit(ZETA, &spin);
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("id").to_owned();
    let spinner = the_run_process(serve.proc.child.id());
    // Four threads spin; over two seconds of the wall clock, the group
    // lets them have a quarter of a core (measured from outside).
    let (cpu0, wall0) = (cpu_time(spinner), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_time(spinner).saturating_sub(cpu0).as_secs_f64();
    let cores = used / wall0.elapsed().as_secs_f64();
    assert!(
        cores < 0.4,
        "{cores:.2} cores used by a tenant held to 0.25"
    );
    let (status, _) = serve.call("POST", &format!("/api/runs/{id}/stop"), Some(ZETA), "");
    assert_eq!(status, 200);
    serve.ended(ZETA, &id);
}
