//! Admission, property-tested against a real `weir serve`: configs with
//! extreme numbers and durations, using only plugins the tenant may use,
//! are either refused with reasons (400, 403, 429) or admitted (201), and
//! then every admitted run ends (by itself, or when stopped); after all of
//! them the server is healthy and runs an ordinary config as before.
//!
//! The configs come from a seeded generator (`WEIR_ADMISSION_SEED` picks
//! another seed, `WEIR_ADMISSION_CONFIGS` another number of them): a
//! failure names the seed and the config, so it can be replayed. The
//! unit-level property test of the same admission, with thousands of cases
//! and odder configs, is `control::admit_props` in the host crate.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::operations::{ACME, Serve, ZETA, generated};

/// How long an admitted run may go on by itself before it is stopped (a
/// config may ask for a connector timeout of 30 days): from then on it
/// must end within its grace period.
const ENDS_BY_ITSELF_WITHIN: Duration = Duration::from_secs(20);
/// How long a stopped run may take to end: the longest grace period the
/// generator sets (the default 30 s), the server's 5 s of slack, and room.
const ENDS_WHEN_STOPPED_WITHIN: Duration = Duration::from_secs(60);

/// A tenant of [`Serve`] and what its configs name.
struct Tenant {
    name: &'static str,
    token: &'static str,
    pipeline: &'static str,
    /// Another tenant's pipeline: refused as an unknown one is.
    other: &'static str,
}

const TENANTS: [Tenant; 2] = [
    Tenant {
        name: "acme",
        token: ACME,
        pipeline: "acme-books",
        other: "zeta-books",
    },
    Tenant {
        name: "zeta",
        token: ZETA,
        pipeline: "zeta-books",
        other: "acme-books",
    },
];

/// One setting: values at its bounds (admitted, however extreme), and
/// values past them or past what its type holds (refused).
type Setting<'a> = (&'a str, &'a [&'a str], &'a [&'a str]);

const D0: &str = "\"0s\"";
const D1MS: &str = "\"1ms\"";
const D30: &str = "\"30days\"";
const D31: &str = "\"31days\"";

/// The generator: each setting set now and then (how often differs from
/// config to config), mostly to a value at a bound, else to one past it.
struct Generator {
    rng: fastrand::Rng,
    /// How often, in 100, this config sets each setting.
    set: u8,
    /// The folder acme may grant (zeta may grant none).
    acme_files: String,
}

impl Generator {
    fn pick<'a>(&mut self, values: &[&'a str]) -> &'a str {
        values[self.rng.usize(..values.len())]
    }

    fn now_and_then(&mut self) -> bool {
        self.rng.u8(..100) < self.set
    }

    /// `key = value` lines for the settings set: a value past the bounds
    /// one time in four.
    fn settings(&mut self, settings: &[Setting]) -> Vec<String> {
        let mut lines = Vec::new();
        for (key, within, past) in settings {
            if self.now_and_then() {
                let values = if within.is_empty() || self.rng.u8(..4) == 0 {
                    past
                } else {
                    within
                };
                lines.push(format!("{key} = {}", self.pick(values)));
            }
        }
        lines
    }

    fn limits(&mut self) -> String {
        let lines = self.settings(&[
            (
                "memory_mib",
                &["1", "16", "128", "4096"],
                &["129", "4097", "0", "18446744073709551615"],
            ),
            ("call_timeout", &[D1MS, "\"10s\""], &[D30, D0]),
            ("execute_timeout", &[D1MS, "\"1h\"", D30], &[D31]),
            (
                "max_children",
                &["1", "1000000"],
                &["1000001", "0", "4294967296"],
            ),
            ("max_document_mib", &["1", "4096"], &["4097", "0"]),
            ("max_depth", &["1", "100"], &["101", "0"]),
            ("log_lines_per_second", &["1", "1000000"], &["1000001", "0"]),
        ]);
        format!("{{ {} }}", lines.join(", "))
    }

    /// Sometimes a granted directory: acme's folder, or one of the server's.
    fn grants(&mut self) -> String {
        if !self.now_and_then() {
            return String::new();
        }
        let acme_files = self.acme_files.clone();
        let host = quoted(self.pick(&[acme_files.as_str(), "/etc"]));
        format!(", grants = {{ dirs = [{{ host = {host}, guest = \"/d\" }}] }}")
    }

    /// The plugin at `path` (now and then another, the tenant may not use).
    fn plugin(&mut self, path: &str, config: &str) -> String {
        let path = if self.rng.u8(..100) < 3 {
            self.pick(&[
                "jsonl_indexer.wasm",
                "../dist/nop_indexer.wasm",
                "/etc/passwd",
            ])
        } else {
            path
        };
        let (limits, grants) = (self.limits(), self.grants());
        format!(
            "{{ path = {}, config = {config}, limits = {limits}{grants} }}",
            quoted(path)
        )
    }

    /// Mostly the tenant's pipeline; now and then another tenant's, or a
    /// name no config may have.
    fn pipeline_name(&mut self, tenant: &Tenant) -> String {
        match self.rng.u8(..100) {
            0..90 => tenant.pipeline.to_owned(),
            90..94 => tenant.other.to_owned(),
            94..97 => "n".repeat(200),
            _ => "bell\u{7}".to_owned(),
        }
    }

    fn section(&mut self, header: &str, settings: &[Setting]) -> String {
        let lines = self.settings(settings);
        if lines.is_empty() {
            String::new()
        } else {
            format!("[{header}]\n{}\n", lines.join("\n"))
        }
    }

    /// A whole config for `tenant`: a generator connector of 1 to 50
    /// documents, up to two trim stages, the nop indexer.
    fn config(&mut self, tenant: &Tenant) -> String {
        let backoffs: &[&str] = &[D0, D1MS, D30];
        let retries: Setting = ("max_retries", &["0", "4294967295"], &["4294967296", "-1"]);
        let mut text = self.section(
            "runner",
            &[
                (
                    "connector_timeout",
                    &[D1MS, "\"1h\"", D30],
                    &[D31, "\"18446744073709551615s\"", "5"],
                ),
                ("log_interval", &[D1MS, D30], &[D0, "\"100000000000000h\""]),
                (
                    "stall_timeout",
                    &["\"31s\"", D30],
                    &[D1MS, "\"720h 1ns\"", D0],
                ),
                ("liveness_timeout", &[D1MS, D30], &[D0]),
                ("grace_period", &[D0, D1MS, "\"1s\""], &[D31]),
                // The operator's: refused whatever its value.
                ("cache_max_mib", &[], &["1", "2048"]),
            ],
        );
        text += &self.section(
            "publisher",
            &[
                (
                    "queue_capacity",
                    &["1", "1000000"],
                    &["1000001", "0", "18446744073709551615", "-1"],
                ),
                ("queue_max_mib", &["1", "1024"], &["1025", "0", "1e300"]),
                (
                    "max_docs_per_second",
                    &["1000", "1000000000"],
                    &["1000000001", "0", "4294967296"],
                ),
            ],
        );
        text += &self.section(
            "worker",
            &[
                (
                    "threads",
                    &["1", "2", "16"],
                    &["17", "0", "9223372036854775807"],
                ),
                retries,
                ("retry_backoff", backoffs, &[D31]),
                ("retry_max_backoff", backoffs, &[D31]),
                ("retry_traps", &["true", "false"], &["1"]),
            ],
        );
        let count = self.rng.u64(1..=50);
        let pipeline = quoted(&self.pipeline_name(tenant));
        let generator = self.plugin(
            "generator_connector.wasm",
            &format!("{{ count = {count}, fields = {{ title = \"  a title  \" }} }}"),
        );
        let stages: Vec<String> = (0..self.rng.usize(0..=2))
            .map(|i| {
                let trim = self.plugin("trim_whitespace.wasm", "{ fields = [\"title\"] }");
                format!("{{ name = \"trim{i}\", plugin = {trim} }}")
            })
            .collect();
        let indexer = self.plugin("nop_indexer.wasm", "{}");
        let indexer_settings = self.settings(&[
            ("instances", &["1", "4", "64"], &["65", "0"]),
            ("batch_size", &["1", "100000"], &["100001", "0"]),
            (
                "batch_max_bytes",
                &["1", "1073741824"],
                &["1073741825", "0"],
            ),
            // 30 days is refused too: the stall timeout must be longer.
            ("batch_timeout", &[D0, D1MS], &[D30, D31]),
            retries,
            ("retry_backoff", backoffs, &[D31]),
            ("retry_max_backoff", backoffs, &[D31]),
            ("retryable_statuses", &["[]", "[429, 503]"], &["[65536]"]),
        ]);
        text += &format!(
            "[[connectors]]\nname = \"gen\"\npipeline = {pipeline}\nplugin = {generator}\n\
             [[pipelines]]\nname = {pipeline}\nstages = [{}]\n\
             [indexer]\nplugin = {indexer}\n{}\n",
            stages.join(", "),
            indexer_settings.join("\n")
        );
        if self.now_and_then() {
            text += "[dead_letters]\nenabled = false\n";
        }
        text
    }
}

/// `text` as a TOML string (JSON's escapes are TOML's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string")
}

/// What became of the submitted configs.
#[derive(Debug, Default)]
struct Outcomes {
    refused: usize,
    ended: usize,
    stopped: usize,
}

/// Submit `config` as `tenant`: a refusal must give its reasons, and an
/// admitted run must end.
fn submit_and_end(serve: &Serve, tenant: &Tenant, config: &str, outcomes: &mut Outcomes) {
    let (status, answer) = serve.submit(tenant.token, config);
    match status {
        201 => {
            let id = answer["id"].as_str().expect("a run id").to_owned();
            let run = match ended_within(serve, tenant.token, &id, ENDS_BY_ITSELF_WITHIN) {
                Some(run) => {
                    outcomes.ended += 1;
                    run
                }
                None => {
                    let path = format!("/api/runs/{id}/stop");
                    let (status, stopping) = serve.call("POST", &path, Some(tenant.token), "");
                    // 409: it ended between the last look and the stop.
                    assert!([200, 409].contains(&status), "{stopping}");
                    outcomes.stopped += 1;
                    ended_within(serve, tenant.token, &id, ENDS_WHEN_STOPPED_WITHIN)
                        .unwrap_or_else(|| panic!("run {id} did not end once stopped"))
                }
            };
            let status = run["status"].as_str().unwrap_or_default();
            assert!(
                ["success", "partial_success", "failure", "interrupted"].contains(&status),
                "{run}"
            );
        }
        400 | 403 => {
            outcomes.refused += 1;
            let problems = answer["problems"].as_array().cloned().unwrap_or_default();
            assert!(
                !problems.is_empty()
                    && problems
                        .iter()
                        .all(|p| p.as_str().is_some_and(|p| !p.trim().is_empty())),
                "a refusal without its reasons: {answer}"
            );
        }
        429 => {
            outcomes.refused += 1;
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(!error.is_empty(), "{answer}");
        }
        other => panic!("answered {other}: {answer}"),
    }
}

/// Run `id` once it has ended, or `None` if it is still going after `within`.
fn ended_within(serve: &Serve, token: &str, id: &str, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    loop {
        let (status, run) = serve.call("GET", &format!("/api/runs/{id}"), Some(token), "");
        assert_eq!(status, 200, "{run}");
        let state = run["status"].as_str().unwrap_or_default();
        if !["running", "paused", "stopping"].contains(&state) {
            return Some(run);
        }
        if Instant::now() >= deadline {
            return None;
        }
        // Polled at 10 a second: within the token's 50 requests a second.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn extreme_configs_are_refused_with_reasons_or_run_to_their_end_and_the_server_survives() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(dir.path());
    // Issue 24's number, unless another is asked for.
    let seed = from_env("WEIR_ADMISSION_SEED", 24);
    let configs = from_env("WEIR_ADMISSION_CONFIGS", 60);
    let mut generator = Generator {
        rng: fastrand::Rng::with_seed(seed),
        set: 0,
        acme_files: dir.path().join("acme-files").display().to_string(),
    };
    let mut outcomes = Outcomes::default();
    let started = Instant::now();
    for i in 0..configs {
        let tenant = &TENANTS[usize::try_from(i % 2).expect("0 or 1")];
        generator.set = [3, 8, 20][generator.rng.usize(..3)];
        let config = generator.config(tenant);
        let case = std::panic::AssertUnwindSafe(|| {
            submit_and_end(&serve, tenant, &config, &mut outcomes);
        });
        if let Err(panic) = std::panic::catch_unwind(case) {
            eprintln!("seed {seed}, config {i}, as {}:\n{config}", tenant.name);
            std::panic::resume_unwind(panic);
        }
    }
    eprintln!("{configs} configs in {:?}: {outcomes:?}", started.elapsed());
    assert!(
        outcomes.ended + outcomes.stopped > 0 && outcomes.refused > 0,
        "both sides exercised: {outcomes:?}"
    );

    // The server survived all of it, and runs an ordinary config as before.
    let health = serve.call("GET", "/healthz", None, "");
    assert_eq!(health.0, 200, "{health:?}");
    let nop = r#"{ path = "nop_indexer.wasm" }"#;
    let (status, run) = serve.submit(ACME, &generated("acme-books", 20, nop));
    assert_eq!(status, 201, "{run}");
    let done = serve.ended(ACME, run["id"].as_str().expect("a run id"));
    assert_eq!(
        (done["status"].as_str(), done["counts"]["indexed"].as_u64()),
        (Some("success"), Some(20)),
        "{done}"
    );
}
