//! Reading configs: defaults, relative paths, overrides, shape errors and
//! tenant limits. `MINIMAL` and `parse` serve the checks' tests too.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::{Config, Problem, Problems};
use crate::plugin::PluginSpec;

pub(super) const MINIMAL: &str = r#"
    [[connectors]]
    name = "c"
    pipeline = "p"
    plugin = { path = "conn.wasm", grants = { dirs = [{ host = "data", guest = "/data" }] } }

    [[pipelines]]
    name = "p"
    stages = [{ name = "s", plugin = { path = "/abs/stage.wasm", config = { a = 1 } } }]

    [indexer]
    plugin = { path = "idx.wasm" }
"#;

/// Each of `expected` is one of `errors`, as printed; the printed errors.
pub(super) fn assert_reported(errors: &[Problem], expected: &[&str]) -> Vec<String> {
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    for expected in expected {
        assert!(
            messages.iter().any(|m| m == expected),
            "{expected} not in {messages:?}"
        );
    }
    messages
}

pub(super) fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config, Problems> {
    let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    Config::parse(text, Path::new("/etc/weir"), env)
}

#[test]
fn defaults_and_relative_paths() {
    let config = parse(MINIMAL, &[]).expect("valid");
    assert_eq!(config.publisher.queue_capacity, 1_000);
    let (location, indexer) = config.indexer_for("p").expect("indexer");
    assert_eq!(location, "indexer");
    assert_eq!(indexer.batch_size, 100);
    assert_eq!(indexer.retryable_statuses, [429, 503]);
    assert_eq!(
        config.connectors[0].plugin.path,
        Path::new("/etc/weir/conn.wasm")
    );
    assert_eq!(
        config.connectors[0].plugin.grants.dirs[0].host,
        Path::new("/etc/weir/data")
    );
    assert_eq!(
        config.pipelines[0].stages[0].plugin.path,
        Path::new("/abs/stage.wasm")
    );
    assert_eq!(config.pipelines[0].stages[0].plugin.config["a"], 1);
}

#[test]
fn environment_overrides() {
    let config = parse(
        MINIMAL,
        &[
            ("WEIR__WORKER__THREADS", "7"),
            ("WEIR__INDEXER__BATCH_TIMEOUT", "2s"),
            ("WEIR__RUNNER__CACHE_DIR", "cache"),
            ("UNRELATED", "x"),
        ],
    )
    .expect("valid");
    assert_eq!(config.worker.threads, 7);
    assert_eq!(
        config.indexer.as_ref().map(|i| i.batch_timeout),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        config.runner.cache_dir.as_deref(),
        Some(Path::new("/etc/weir/cache"))
    );
    let err = parse(MINIMAL, &[("WEIR__CONNECTORS__X", "1")]).expect_err("refused");
    assert!(err.to_string().contains("cannot be overridden"), "{err}");
    let err = parse(MINIMAL, &[("WEIR__WORKER__THREADS", "many")]).expect_err("bad type");
    assert!(err.to_string().contains("threads"), "{err}");
}

#[test]
fn unknown_fields_are_errors_with_their_name() {
    let err = parse(
        &MINIMAL.replace("[indexer]", "[indexer]\nbatch_sise = 5"),
        &[],
    )
    .expect_err("unknown field");
    assert!(err.to_string().contains("batch_sise"), "{err}");
    let err = parse("[[connectors]]\nname = 1", &[]).expect_err("bad");
    assert_eq!(err.0.len(), 1);
}

#[test]
fn every_shape_error_is_reported_at_once_with_its_path() {
    let text = MINIMAL.replace(
        "[indexer]",
        "[indexer]\nbatch_sise = 5\ninstances = \"two\"",
    ) + "\n[worker]\nthreads = -1\n[runner]\nlog_interval = \"often\"\n";
    let err = parse(&text, &[]).expect_err("four problems");
    let text = err.to_string();
    assert!(text.starts_with("4 configuration errors:"), "{text}");
    for path in [
        "indexer.batch_sise: unknown key",
        "indexer.instances: invalid type: string \"two\"",
        "worker.threads: invalid value: integer `-1`",
        "runner.log_interval: ",
    ] {
        assert!(text.contains(path), "{path:?} missing from {text}");
    }
}

#[test]
fn tenants_give_defaults_to_their_pipelines_plugins() {
    let text = r#"
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = { path = "conn.wasm" }
        [[connectors]]
        name = "other"
        pipeline = "q"
        plugin = { path = "conn.wasm" }

        [[pipelines]]
        name = "p"
        stages = [
            { name = "s", plugin = { path = "s.wasm" } },
            { name = "own", plugin = { path = "s.wasm", limits = { memory_mib = 512 } } },
        ]
        [[pipelines]]
        name = "q"
        stages = [{ name = "s", plugin = { path = "s.wasm" } }]

        [indexer]
        plugin = { path = "idx.wasm" }

        [[tenants]]
        name = "acme"
        pipelines = ["p"]
        limits = { memory_mib = 64, call_timeout = "2s", max_children = 10 }
    "#;
    let config = parse(text, &[]).expect("valid");
    let plugins: BTreeMap<String, &PluginSpec> =
        config.plugins().map(|at| (at.location, at.spec)).collect();
    let limits = |location: &str| &plugins[location].limits;
    assert_eq!(limits("pipelines.p.stages.s").memory_mib(), 64);
    assert_eq!(
        limits("pipelines.p.stages.s").call_timeout(),
        Duration::from_secs(2)
    );
    assert_eq!(limits("pipelines.p.stages.s").max_children(), 10);
    assert_eq!(
        limits("pipelines.p.stages.own").memory_mib(),
        512,
        "the plugin's own wins"
    );
    assert_eq!(limits("pipelines.p.stages.own").max_children(), 10);
    assert_eq!(limits("connectors.c").memory_mib(), 64, "its connector too");
    assert_eq!(
        limits("pipelines.q.stages.s").memory_mib(),
        256,
        "another tenant's: default"
    );
    assert_eq!(limits("connectors.other").memory_mib(), 256);
    assert_eq!(
        limits("indexer").memory_mib(),
        256,
        "a shared indexer is no tenant's"
    );
    assert!(
        !config
            .check()
            .iter()
            .any(|e| e.location.starts_with("tenants")),
        "{:?}",
        config.check()
    );

    let bad = format!("{text}\n[[tenants]]\nname = \"acme\"\npipelines = [\"p\", \"nope\"]\n");
    let errors = parse(&bad, &[]).expect("parses").check();
    assert_reported(
        &errors,
        &[
            "tenants.acme: duplicate tenant name",
            "tenants.acme.pipelines: pipeline `p` already belongs to tenant `acme`",
            "tenants.acme.pipelines: no pipeline is named `nope`",
        ],
    );
}
