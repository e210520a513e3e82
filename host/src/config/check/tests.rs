//! The structural checks, each problem with its location.

use crate::config::tests::{MINIMAL, assert_reported, parse};

#[test]
fn the_stall_timeout_outlasts_every_call_a_document_waits_on() {
    let config = parse(MINIMAL, &[("WEIR__RUNNER__STALL_TIMEOUT", "31s")]).expect("valid");
    assert!(
        config
            .check()
            .iter()
            .all(|e| e.location != "runner.stall_timeout")
    );
    let config = parse(MINIMAL, &[("WEIR__RUNNER__STALL_TIMEOUT", "30s")]).expect("valid");
    let errors = config.check();
    let error = errors
        .iter()
        .find(|e| e.location == "runner.stall_timeout")
        .expect("the default 30 s call timeout is not shorter");
    assert!(error.message.contains("call_timeout 30s"), "{error}");
    let config = parse(MINIMAL, &[("WEIR__RUNNER__LIVENESS_TIMEOUT", "0s")]).expect("valid");
    assert!(
        config
            .check()
            .iter()
            .any(|e| e.location == "runner.liveness_timeout")
    );
}

#[test]
fn the_stall_timeout_outlasts_a_batch_that_is_not_full() {
    // Else a healthy run's last documents, waiting for their batch to
    // fill, end it as stalled.
    let text = with_setting("indexer.batch_timeout", "\"5m\"");
    let errors = parse(&text, &[]).expect("valid").check();
    assert_reported(
        &errors,
        &[
            "runner.stall_timeout: must be longer than documents may wait in a batch that is not full (indexer has batch_timeout 300s)",
        ],
    );
    let text = with_setting("indexer.batch_timeout", "\"4m59s\"");
    let errors = parse(&text, &[]).expect("valid").check();
    assert!(
        errors.iter().all(|e| e.location != "runner.stall_timeout"),
        "{errors:?}"
    );
}

#[test]
fn check_reports_every_structural_error() {
    let text = MINIMAL.replace("pipeline = \"p\"", "pipeline = \"nope\"")
        + "\n[worker]\nthreads = 0\n[[pipelines]]\nname = \"p\"\n";
    let config = parse(&text, &[]).expect("parses");
    let errors = config.check();
    let locations: Vec<&str> = errors.iter().map(|e| e.location.as_str()).collect();
    for expected in [
        "connectors.c.pipeline",
        "pipelines.p",
        "worker.threads",
        "connectors.c.plugin.path",
        "connectors.c.plugin.grants.dirs[0].host",
        "pipelines.p.stages.s.plugin.path",
        "indexer.plugin.path",
    ] {
        assert!(
            locations.contains(&expected),
            "{expected} missing from {locations:?}"
        );
    }
}

#[test]
fn instance_policy_and_digest_are_checked() {
    let text = MINIMAL
        .replace(
            r#"plugin = { path = "idx.wasm" }"#,
            r#"plugin = { path = "idx.wasm", instance = "fresh", sha256 = "abc" }"#,
        )
        .replace(
            r#"config = { a = 1 } }"#,
            r#"config = { a = 1 }, instance = "fresh", limits = { log_lines_per_second = 0 } }"#,
        );
    let errors = parse(&text, &[]).expect("parses").check();
    let messages = assert_reported(
        &errors,
        &[
            "indexer.plugin.instance: only stages can have a fresh instance per document",
            "indexer.plugin.sha256: must be 64 hexadecimal digits (a SHA-256)",
            "pipelines.p.stages.s.plugin.limits.log_lines_per_second: must be at least 1",
        ],
    );
    assert!(
        !messages
            .iter()
            .any(|m| m.contains("stages.s.plugin.instance")),
        "a stage may be fresh: {messages:?}"
    );
}

/// A config setting `key = value` (dotted: `publisher.queue_capacity`).
fn with_setting(key: &str, value: &str) -> String {
    let (table, name) = key.rsplit_once('.').expect("a dotted key");
    let header = format!("[{table}]\n");
    if MINIMAL.contains(&header) {
        MINIMAL.replace(&header, &format!("{header}{name} = {value}\n"))
    } else {
        format!("{MINIMAL}\n{header}{name} = {value}\n")
    }
}

#[test]
fn numbers_past_what_the_runtime_can_give_are_refused_before_anything_is_built() {
    // Each of these would size an allocation, start threads or overflow a
    // clock if it were taken as it is.
    for (key, value) in [
        ("publisher.queue_capacity", "1000000000000000"),
        ("publisher.queue_max_mib", "1000000000000"),
        ("publisher.max_docs_per_second", "4294967295"),
        ("worker.threads", "1000000"),
        ("indexer.batch_size", "1000000000000000"),
        ("indexer.batch_max_bytes", "9223372036854775807"),
        ("runner.cache_max_mib", "9223372036854775807"),
        ("runner.connector_timeout", "\"500000000000years\""),
        ("runner.grace_period", "\"1000years\""),
        ("worker.retry_max_backoff", "\"100years\""),
        ("indexer.batch_timeout", "\"31days\""),
    ] {
        let text = with_setting(key, value);
        let config = parse(&text, &[]).unwrap_or_else(|e| panic!("{key} = {value}: {e}"));
        let errors = config.check();
        let error = errors
            .iter()
            .find(|e| e.location == key)
            .unwrap_or_else(|| panic!("{key} = {value} was not refused: {errors:?}"));
        assert!(error.message.starts_with("must be at most"), "{error}");
    }
}

#[test]
fn plugin_limits_past_what_an_instance_can_hold_are_refused() {
    let text = MINIMAL.replace(
        "config = { a = 1 } }",
        r#"config = { a = 1 }, limits = { memory_mib = 1000000, max_document_mib = 5000, max_children = 4000000000, log_lines_per_second = 4000000000, call_timeout = "100years", execute_timeout = "100years" } }"#,
    );
    let config = parse(&text, &[]).expect("parses");
    let errors = config.check();
    for name in [
        "memory_mib",
        "max_document_mib",
        "max_children",
        "log_lines_per_second",
        "call_timeout",
        "execute_timeout",
    ] {
        let at = format!("pipelines.p.stages.s.plugin.limits.{name}");
        assert!(
            errors
                .iter()
                .any(|e| e.location == at && e.message.starts_with("must be at most")),
            "{at} not refused: {errors:?}"
        );
    }
}

#[test]
fn the_largest_accepted_values_are_accepted() {
    for (key, value) in [
        ("publisher.queue_capacity", "1000000"),
        ("worker.threads", "256"),
        ("indexer.batch_size", "100000"),
        ("runner.connector_timeout", "\"30days\""),
    ] {
        let text = with_setting(key, value);
        let config = parse(&text, &[]).expect("parses");
        assert!(
            config.check().iter().all(|e| e.location != key),
            "{key} = {value}: {:?}",
            config.check()
        );
    }
}

proptest::proptest! {
    /// Whatever number a config sets, checking it never panics, and a value
    /// past the setting's bound is always reported.
    #[test]
    fn any_number_is_checked_without_a_panic(
        which in 0usize..5,
        value in proptest::prop_oneof![0u64..=2_000_000, proptest::num::u64::ANY],
    ) {
        let (key, max) = [
            ("publisher.queue_capacity", super::bounds::MAX_QUEUE_CAPACITY),
            ("publisher.queue_max_mib", super::bounds::MAX_QUEUE_MIB),
            ("worker.threads", super::bounds::MAX_WORKER_THREADS),
            ("indexer.batch_size", super::bounds::MAX_BATCH_SIZE),
            ("indexer.batch_max_bytes", super::bounds::MAX_BATCH_BYTES),
        ][which];
        // TOML integers are signed 64-bit: larger ones do not parse at all.
        let Ok(config) = parse(&with_setting(key, &value.to_string()), &[]) else {
            proptest::prop_assert!(i64::try_from(value).is_err());
            return Ok(());
        };
        let errors = config.check();
        let refused = errors.iter().any(|e| e.location == key);
        proptest::prop_assert_eq!(refused, value == 0 || value > max, "{} = {}: {:?}", key, value, errors);
    }
}

#[test]
fn names_and_their_numbers_are_bounded() {
    let long = "n".repeat(super::names::MAX_NAME_BYTES + 1);
    let text = MINIMAL
        .replace("name = \"c\"", &format!("name = {long:?}"))
        .replace("name = \"s\"", "name = \"\"")
        .replace("name = \"p\"", "name = \"p\\u0007\"")
        .replace("pipeline = \"p\"", "pipeline = \"p\\u0007\"");
    let config = parse(&text, &[]).expect("parses");
    let errors = config.check();
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    for expected in [
        "a name of 129 bytes is longer than the 128 a name may have",
        "a name must not be empty",
        "a name must not hold control characters",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(expected)),
            "{expected} not in {messages:?}"
        );
    }
    // A location quotes at most the first 32 characters of a name.
    assert!(messages.iter().all(|m| m.len() < 200), "{messages:?}");

    let stages: Vec<String> = (0..=super::names::MAX_STAGES)
        .map(|i| format!("{{ name = \"s{i}\", plugin = {{ path = \"s.wasm\" }} }}"))
        .collect();
    let text = MINIMAL.replace(
        r#"stages = [{ name = "s", plugin = { path = "/abs/stage.wasm", config = { a = 1 } } }]"#,
        &format!("stages = [{}]", stages.join(", ")),
    );
    let config = parse(&text, &[]).expect("parses");
    assert_reported(
        &config.check(),
        &["pipelines.p.stages: 257 is more than the 256 a config may have"],
    );
}

#[test]
fn stage_batches_are_bounded_and_shorter_than_a_stall() {
    let with_batch = |batch: &str| {
        MINIMAL.replace(
            "config = { a = 1 } } }",
            &format!("config = {{ a = 1 }} }}, batch = {batch} }}"),
        )
    };
    let config = parse(&with_batch("{ size = 1, wait = \"0s\" }"), &[]).expect("valid");
    let errors = config.check();
    assert!(
        errors
            .iter()
            .all(|e| !e.location.contains("batch") && e.location != "runner.stall_timeout"),
        "{errors:?}"
    );
    let errors = parse(&with_batch("{ size = 0 }"), &[])
        .expect("parses")
        .check();
    assert_reported(
        &errors,
        &["pipelines.p.stages.s.batch.size: must be at least 1"],
    );
    let errors = parse(&with_batch("{ size = 4097, wait = \"11s\" }"), &[])
        .expect("parses")
        .check();
    assert_reported(
        &errors,
        &[
            "pipelines.p.stages.s.batch.size: must be at most 4096",
            "pipelines.p.stages.s.batch.wait: must be at most 10s",
        ],
    );
    let errors = parse(
        &(with_batch("{ wait = \"10s\" }") + "\n[runner]\nstall_timeout = \"10s\"\n"),
        &[],
    )
    .expect("parses")
    .check();
    assert_reported(
        &errors,
        &[
            "runner.stall_timeout: must be longer than a worker waits to fill a stage's batch (pipelines.p.stages.s has batch.wait 10s)",
        ],
    );
    // An unknown key is a parse error, as in every table.
    assert!(parse(&with_batch("{ sise = 3 }"), &[]).is_err());
}

#[test]
fn a_stage_condition_is_checked_at_its_place() {
    let text = MINIMAL.replace(
        r#"config = { a = 1 } }"#,
        r#"config = { a = 1 } }, when = { any = [{ field = "a", exists = true }, { field = "b", matches = "(" }, { path = "x" }] }"#,
    );
    let config = parse(&text, &[]).expect("its shape is valid");
    let messages = assert_reported(
        &config.check(),
        &[
            "pipelines.p.stages.s.when.any[2]: `path` needs a test: one of `exists`, `equals`, `matches`",
        ],
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("pipelines.p.stages.s.when.any[1].matches: is not a pattern")),
        "{messages:?}"
    );
    // A key the condition does not know is a shape error, with its path.
    let text = MINIMAL.replace(
        r#"config = { a = 1 } }"#,
        r#"config = { a = 1 } }, when = { field = "a", equal = 1 }"#,
    );
    let errors = parse(&text, &[]).expect_err("an unknown key");
    assert!(errors.to_string().contains("equal"), "{errors}");
}

#[test]
fn every_duration_has_a_shortest_and_a_longest_named_in_its_refusal() {
    use super::bounds::{SPANS, span_of};
    // A log line a millisecond, heartbeats and retries without pause: each
    // is refused, naming its key and its shortest.
    for (key, value, shortest) in [
        ("runner.log_interval", "\"1ms\"", "1s"),
        ("runner.log_interval", "\"0s\"", "1s"),
        ("runner.stall_timeout", "\"10ms\"", "1s"),
        ("runner.liveness_timeout", "\"999ms\"", "1s"),
        ("runner.connector_timeout", "\"1ms\"", "100ms"),
        ("worker.retry_backoff", "\"0s\"", "1ms"),
        ("indexer.batch_timeout", "\"0s\"", "1ms"),
        ("indexer.retry_max_backoff", "\"1us\"", "1ms"),
    ] {
        let text = with_setting(key, value);
        let errors = parse(&text, &[]).expect("parses").check();
        let expected = format!("must be at least {shortest}");
        assert!(
            errors
                .iter()
                .any(|e| e.location == key && e.message.starts_with(&expected)),
            "{key} = {value}: {errors:?}"
        );
    }
    for (key, value) in [
        ("runner.log_interval", "\"1s\""),
        ("runner.grace_period", "\"0s\""),
        ("runner.connector_timeout", "\"100ms\""),
    ] {
        let errors = parse(&with_setting(key, value), &[])
            .expect("parses")
            .check();
        assert!(errors.iter().all(|e| e.location != key), "{errors:?}");
    }
    let limits = MINIMAL.replace(
        "config = { a = 1 } }",
        r#"config = { a = 1 }, limits = { call_timeout = "1ms", execute_timeout = "0s" } }"#,
    );
    let errors = parse(&limits, &[]).expect("parses").check();
    for name in ["call_timeout", "execute_timeout"] {
        let location = format!("pipelines.p.stages.s.plugin.limits.{name}");
        assert!(
            errors
                .iter()
                .any(|e| e.location == location && e.message.starts_with("must be at least 10ms")),
            "{location}: {errors:?}"
        );
    }
    let kafka = format!(
        "{MINIMAL}\n[kafka]\nbootstrap_servers = \"b:9092\"\nheartbeat_interval = \"1ms\"\n"
    );
    let errors = parse(&kafka, &[]).expect("parses").check();
    assert!(
        errors
            .iter()
            .any(|e| e.location == "kafka.heartbeat_interval"
                && e.message.starts_with("must be at least 100ms")),
        "{errors:?}"
    );
    // Every default is within its span.
    let defaults = parse(MINIMAL, &[]).expect("parses").check();
    assert!(
        defaults
            .iter()
            .all(|e| !e.message.starts_with("must be at")),
        "{defaults:?}"
    );
    for (key, span) in SPANS {
        assert!(span.min <= span.max, "{key}");
        assert_eq!(span_of(key).max, span.max);
    }
}

#[test]
fn the_mass_delete_share_is_a_share_from_0_to_1() {
    let config = parse(MINIMAL, &[]).expect("valid");
    assert_eq!(config.state.max_delete_share, 0.5, "the default");
    for fine in ["0", "0.25", "1"] {
        let config = parse(MINIMAL, &[("WEIR__STATE__MAX_DELETE_SHARE", fine)]).expect("valid");
        assert!(
            config
                .check()
                .iter()
                .all(|e| e.location != "state.max_delete_share"),
            "{fine}"
        );
    }
    for wrong in ["1.5", "-0.1", "nan"] {
        let config = parse(MINIMAL, &[("WEIR__STATE__MAX_DELETE_SHARE", wrong)]).expect("parses");
        let errors = config.check();
        let error = errors
            .iter()
            .find(|e| e.location == "state.max_delete_share")
            .unwrap_or_else(|| panic!("{wrong} is refused: {errors:?}"));
        assert!(
            error.message.contains("from 0 to 1") && error.message.contains("--allow-deletes"),
            "{error}"
        );
    }
}
