//! Property test of admission: random configs within the schema, with
//! extreme numbers, durations, names, paths and grants, are either refused
//! with reasons or admitted with every bound holding.
//!
//! The *generator* ([`generate`]) writes TOML as a tenant could: every
//! setting of `[runner]`, `[publisher]`, `[worker]`, the indexers,
//! `[dead_letters]` and the plugins' limits, each unset or set to a value
//! from ordinary ones to `u64::MAX`, `1e300`, negative numbers and
//! durations of `100000000000000h`; names the tenant owns, another
//! tenant's, and long, empty, control-character and unicode ones; plugin
//! paths allowed, disallowed, absolute and climbing out; granted
//! directories inside, outside, missing and behind links; HTTP grants
//! within the tenant's and beyond. The *oracle* ([`holds`]) decides: no
//! panic, and either a refusal whose every problem says where it is, or a
//! config that runs within every bound the checks and the tenant's
//! ceilings set.
//!
//! It runs 256 cases in the suite; for a longer run:
//! `PROPTEST_CASES=100000 cargo test -p weir --lib control::admit_props`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config as Cases, TestCaseError, TestRunner};

use generate::{Shape, config};

mod generate;
mod sql;

use super::admit::{MAX_INSTANCES, MAX_QUEUE_MIB, MAX_THREADS, Refusal, admit};
use super::operator::{OperatorConfig, TenantPolicy};
use crate::config::bounds::*;
use crate::config::names::{MAX_CONNECTORS, MAX_NAME_BYTES, MAX_PIPELINES, MAX_STAGES};
use crate::config::{Config, IndexerConfig, MAX_DURATION};
use crate::core::document::DocLimits;
use crate::plugin::{HttpAllow, Limits};

/// The operator's files: a plugin dir; tenant `acme` (pipelines `a`, `a2`;
/// a ceiling on every limit; a directory and HTTP hosts it may grant),
/// `zeta` (pipeline `z`; no ceilings: only the built-in bounds hold) and
/// `long` (pipeline `l`; calls of up to 10 minutes, longer than the
/// default stall timeout).
///
/// Beside them: a file and a folder outside the plugin dir and outside
/// acme's folder, and a link in acme's folder leading out of it.
struct Fixture {
    _dir: tempfile::TempDir,
    root: String,
    operator: OperatorConfig,
}

const OPERATOR: &str = r#"
[server]
data_dir = "data"
plugin_dir = "plugins"
[[tenants]]
name = "acme"
token_env = "A"
pipelines = ["a", "a2"]
plugins = ["p.wasm", "q.wasm", "gone.wasm"]
dirs = ["acme"]
http = ["search.acme.internal", "10.20.0.0/16:9200"]
[tenants.limits]
memory_mib = 64
call_timeout = "1m"
execute_timeout = "1h"
max_children = 1000
max_document_mib = 8
max_depth = 32
log_lines_per_second = 100
[[tenants]]
name = "zeta"
token_env = "Z"
pipelines = ["z"]
plugins = ["p.wasm", "q.wasm"]
[[tenants]]
name = "long"
token_env = "L"
pipelines = ["l"]
plugins = ["p.wasm", "q.wasm"]
limits = { call_timeout = "10m" }
"#;

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let at = |p: &str| dir.path().join(p);
        for d in ["plugins/sub", "acme/data", "elsewhere"] {
            std::fs::create_dir_all(at(d)).expect("dir");
        }
        for f in [
            "plugins/p.wasm",
            "plugins/q.wasm",
            "plugins/other.wasm",
            "plugins/sub/p.wasm",
            "outside.wasm",
            "acme/file.txt",
        ] {
            std::fs::write(at(f), b"").expect("file");
        }
        std::os::unix::fs::symlink(at("elsewhere"), at("acme/escape")).expect("symlink");
        std::fs::write(at("operator.toml"), OPERATOR).expect("operator config");
        let operator = OperatorConfig::load(&at("operator.toml")).expect("operator config");
        let root = dir.path().display().to_string();
        Self {
            _dir: dir,
            root,
            operator,
        }
    }
}

// ---- the oracle ----

/// `text`, submitted by `tenant`, is refused with reasons or admitted
/// within every bound; whether it was admitted.
fn holds(fixture: &Fixture, tenant: &TenantPolicy, text: &str) -> Result<bool, TestCaseError> {
    let dead_letters = Path::new(&fixture.root).join("dl.jsonl");
    match admit(text, tenant, &fixture.operator, &dead_letters) {
        Err(
            Refusal::Invalid(problems)
            | Refusal::Forbidden(problems)
            | Refusal::NeedsRestart(problems),
        ) => {
            prop_assert!(!problems.is_empty(), "a refusal with no reason");
            for problem in problems.iter() {
                // A problem of the whole text (TOML that does not parse, a
                // missing table) says where in its message.
                let placed = !problem.location.is_empty()
                    || problem.message.contains("line ")
                    || problem.message.contains('`');
                prop_assert!(placed, "`{}` does not say where", problem);
                prop_assert!(!problem.message.trim().is_empty(), "{:?}", problem);
            }
            Ok(false)
        }
        Ok(config) => {
            admitted_within_bounds(fixture, tenant, &config, &dead_letters)?;
            Ok(true)
        }
    }
}

fn admitted_within_bounds(
    fixture: &Fixture,
    tenant: &TenantPolicy,
    config: &Config,
    dead_letters: &Path,
) -> Result<(), TestCaseError> {
    // What runs is what was checked: the checks find nothing in it.
    let problems = config.check();
    prop_assert!(problems.is_empty(), "admitted, yet: {:?}", problems);
    prop_assert!(config.kafka.is_none() && config.runner.cache_dir.is_none());
    prop_assert_eq!(&config.dead_letters.path, dead_letters);
    prop_assert_eq!(config.tenants.len(), 1);
    prop_assert_eq!(&config.tenants[0].name, &tenant.name);

    let runner = &config.runner;
    for value in [
        runner.connector_timeout,
        runner.log_interval,
        runner.stall_timeout,
        runner.liveness_timeout,
        runner.grace_period,
        config.worker.retry_backoff,
        config.worker.retry_max_backoff,
    ] {
        prop_assert!(value <= MAX_DURATION, "{:?}", value);
    }
    // The cache of compiled plugins is the operator's, shared by every
    // tenant: no config sizes it (a tenant's 1 MiB would empty it).
    prop_assert!(runner.cache_max_mib <= MAX_CACHE_MIB);
    prop_assert_eq!(runner.cache_max_mib, crate::plugin::DEFAULT_CACHE_MAX_MIB);
    prop_assert!((1..=MAX_THREADS).contains(&config.worker.threads));
    let publisher = &config.publisher;
    prop_assert!((1..=MAX_QUEUE_CAPACITY).contains(&(publisher.queue_capacity as u64)));
    prop_assert!((1..=MAX_QUEUE_MIB).contains(&publisher.queue_max_mib));
    if let Some(rate) = publisher.max_docs_per_second {
        prop_assert!((1..=MAX_DOCS_PER_SECOND).contains(&u64::from(rate)));
    }

    let mut instances = config.connectors.len();
    for (location, indexer) in config.indexers() {
        prop_assert!(
            (1..=IndexerConfig::MAX_INSTANCES).contains(&indexer.instances),
            "{}",
            location
        );
        prop_assert!((1..=MAX_BATCH_SIZE).contains(&(indexer.batch_size as u64)));
        prop_assert!((1..=MAX_BATCH_BYTES).contains(&(indexer.batch_max_bytes as u64)));
        for value in [
            indexer.batch_timeout,
            indexer.retry_backoff,
            indexer.retry_max_backoff,
        ] {
            prop_assert!(value <= MAX_DURATION, "{}: {:?}", location, value);
        }
        instances += indexer.instances;
    }
    instances += config
        .pipelines
        .iter()
        .map(|p| p.stages.len() * config.worker.threads)
        .sum::<usize>();
    prop_assert!(instances <= MAX_INSTANCES, "{} instances", instances);

    names_within_bounds(config, tenant)?;
    plugins_within_bounds(fixture, tenant, config)
}

fn names_within_bounds(config: &Config, tenant: &TenantPolicy) -> Result<(), TestCaseError> {
    prop_assert!(config.connectors.len() <= MAX_CONNECTORS);
    prop_assert!(config.pipelines.len() <= MAX_PIPELINES);
    let stages = config.pipelines.iter().flat_map(|p| &p.stages);
    let names = config
        .connectors
        .iter()
        .map(|c| &c.name)
        .chain(config.pipelines.iter().map(|p| &p.name))
        .chain(stages.map(|s| &s.name));
    for name in names {
        prop_assert!(
            !name.is_empty() && name.len() <= MAX_NAME_BYTES && !name.chars().any(char::is_control),
            "{:?}",
            name
        );
    }
    for pipeline in &config.pipelines {
        prop_assert!(pipeline.stages.len() <= MAX_STAGES);
        prop_assert!(
            tenant.pipelines.contains(&pipeline.name),
            "{}",
            pipeline.name
        );
    }
    for connector in &config.connectors {
        prop_assert!(tenant.pipelines.contains(&connector.pipeline));
    }
    Ok(())
}

/// The largest value of each limit: the tenant's ceiling where it sets
/// one, else the built-in bound.
fn ceilings(tenant: &Limits) -> Limits {
    let days = |d: Duration| Some(d.min(MAX_DURATION));
    Limits {
        memory_mib: Some(tenant.memory_mib.unwrap_or(MAX_PLUGIN_MEMORY_MIB)),
        call_timeout: days(tenant.call_timeout.unwrap_or(MAX_DURATION)),
        execute_timeout: days(tenant.execute_timeout.unwrap_or(MAX_DURATION)),
        max_children: Some(tenant.max_children.unwrap_or(MAX_CHILDREN as u32)),
        max_document_mib: Some(tenant.max_document_mib.unwrap_or(MAX_PLUGIN_MEMORY_MIB)),
        max_depth: Some(tenant.max_depth.unwrap_or(DocLimits::MAX_DEPTH as u32)),
        log_lines_per_second: Some(
            tenant
                .log_lines_per_second
                .unwrap_or(MAX_LOG_LINES_PER_SECOND as u32),
        ),
        max_state_mib: Some(tenant.max_state_mib.unwrap_or(MAX_STATE_MIB)),
    }
}

fn plugins_within_bounds(
    fixture: &Fixture,
    tenant: &TenantPolicy,
    config: &Config,
) -> Result<(), TestCaseError> {
    let plugin_dir = fixture.operator.server.plugin_dir.canonicalize()?;
    let ceiling = ceilings(&tenant.limits);
    let reachable: Vec<HttpAllow> = tenant
        .http
        .iter()
        .map(|entry| HttpAllow::parse(entry).expect("the operator's entries parse"))
        .collect();
    for at in config.plugins() {
        let (spec, location) = (at.spec, &at.location);
        let file = spec.path.canonicalize()?;
        prop_assert_eq!(file.parent(), Some(plugin_dir.as_path()), "{}", location);
        let name = file.file_name().and_then(|f| f.to_str()).unwrap_or("");
        prop_assert!(tenant.plugins.iter().any(|p| p == name), "{}", location);
        prop_assert!(spec.sha256.is_some(), "{}: not pinned", location);
        // Every limit in force, not only those set, within the ceilings.
        let limits = &spec.limits;
        let in_force = Limits {
            memory_mib: Some(limits.memory_mib()),
            call_timeout: Some(limits.call_timeout()),
            execute_timeout: Some(limits.execute_timeout()),
            max_children: Some(limits.max_children()),
            max_document_mib: Some(limits.max_document_mib()),
            max_depth: Some(limits.max_depth()),
            log_lines_per_second: Some(limits.log_lines_per_second()),
            max_state_mib: Some(limits.max_state_mib()),
        };
        let over = in_force.over(&ceiling);
        prop_assert!(over.is_empty(), "{}: {:?}", location, over);
        prop_assert!(limits.memory_mib() >= 1 && limits.max_depth() >= 1);
        prop_assert!(!limits.call_timeout().is_zero());
        for dir in &spec.grants.dirs {
            let opened = dir.opened.as_ref();
            prop_assert!(opened.is_some(), "{}: {:?} not opened", location, dir.host);
            prop_assert!(dir.guest.starts_with('/'));
            let real = opened.map(|o| o.handle_path().canonicalize());
            let acme = PathBuf::from(&fixture.root).join("acme").canonicalize()?;
            prop_assert!(
                real.is_some_and(|r| r.is_ok_and(|r| r.starts_with(&acme))),
                "{}: {:?} opened outside the tenant's folder",
                location,
                dir.host
            );
        }
        for entry in &spec.grants.http {
            let grant = HttpAllow::parse(entry).expect("an admitted grant parses");
            prop_assert!(reachable.iter().any(|r| r.covers(&grant)), "{}", entry);
        }
    }
    Ok(())
}

#[test]
fn any_config_is_refused_with_reasons_or_admitted_within_every_bound() {
    let fixture = Fixture::new();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(Cases {
        cases,
        failure_persistence: None,
        ..Cases::default()
    });
    let root = fixture.root.clone();
    let tenants = select(vec!["acme", "acme", "zeta", "zeta", "long"]);
    let mix = (
        select(vec![0.01, 0.03, 0.1, 0.3]),
        select(vec![2, 10, 30]),
        select(vec![false, false, true]),
    );
    let cases = (tenants, mix).prop_flat_map(move |(tenant, (set, odd, largest))| {
        let own = match tenant {
            "acme" => vec!["a", "a2"],
            "zeta" => vec!["z"],
            _ => vec!["l"],
        };
        let root = root.clone();
        let shape = Shape {
            root,
            own,
            set,
            odd,
            largest,
        };
        (Just(tenant), config(&shape))
    });
    let admitted = std::cell::Cell::new(0u32);
    runner
        .run(&cases, |(tenant, text)| {
            let tenant = fixture.operator.tenant(tenant).expect("a tenant");
            let was = holds(&fixture, tenant, &text)?;
            admitted.set(admitted.get() + u32::from(was));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "{} of {} cases admitted",
        admitted.get(),
        runner.config().cases
    );
    // Both sides of the oracle are exercised: a generator that only made
    // refused configs would prove nothing of the bounds.
    assert!(
        admitted.get() >= runner.config().cases / 20,
        "only {} of {} cases admitted",
        admitted.get(),
        runner.config().cases
    );
}
