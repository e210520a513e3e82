//! Signals stop runs and indexers gracefully, in Kafka and local mode.

use std::time::Duration;

use super::{RECORDING_INDEXER, Setup, kafka_config, signal};

#[test]
fn sigint_stops_a_kafka_run_after_its_documents_in_flight() {
    let setup = Setup::new(
        "sigint_kafka",
        &kafka_config(
            "{ count = 300 }",
            r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 10000 } } }"#,
            "",
            r#"grace_period = "120s""#,
            RECORDING_INDEXER,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    setup.wait_until_indexed(10);
    signal(&run, "INT");
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(120)),
        130,
        "{}",
        setup.log("run")
    );
    let counts = setup.counts("docs");
    assert_eq!(
        counts[0], counts[2],
        "everything published finished within the grace period: {counts:?}"
    );
    assert!(
        setup.log("run").contains("Interrupted"),
        "{}",
        setup.log("run")
    );
    assert!(worker.stop() && indexer.stop());
}

#[test]
fn sigterm_to_an_indexer_during_a_backend_outage_leaves_its_batch_for_the_next() {
    // The backend refuses every batch as unreachable; the indexer retries.
    let setup = Setup::new(
        "outage",
        &kafka_config(
            "{ count = 40 }",
            "",
            "",
            "",
            r#"max_retries = 1000
            retry_backoff = "50ms"
            retry_max_backoff = "200ms"
            plugin = { path = @test-indexer, config = { batch_failures = 1000000, connection_failed = true, record = "/out/indexed.jsonl" }, grants = { dirs = [{ host = {out}, guest = "/out", writable = true }] } }"#,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    assert!(
        indexer.wait_for_log(
            &setup.log_path("indexer"),
            "batch failed",
            3,
            Duration::from_secs(60)
        ),
        "{}",
        setup.log("indexer")
    );
    assert!(indexer.stop(), "{}", setup.log("indexer"));
    assert!(
        setup.log("indexer").contains("left to be redelivered"),
        "{}",
        setup.log("indexer")
    );
    // The backend is back: the next indexer gets the batch, nothing failed.
    let mut next = setup.start(
        "indexer-2",
        &["indexer"],
        &[("WEIR__INDEXER__PLUGIN__CONFIG__BATCH_FAILURES", "0".into())],
    );
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(120)),
        0,
        "{}",
        setup.log("run")
    );
    assert_eq!(setup.counts("docs")[..5], [40, 0, 40, 0, 0]);
    assert!(worker.stop() && next.stop());
}

#[test]
fn sigint_stops_a_local_run_after_its_queued_documents() {
    let setup = Setup::new(
        "sigint_local",
        r#"
        [runner]
        cache_dir = {cache}
        log_interval = "1s"
        grace_period = "60s"
        [publisher]
        queue_capacity = 10
        [worker]
        threads = 2
        [indexer]
        batch_size = 5
        batch_timeout = "10ms"
        plugin = { path = @test-indexer }
        [[connectors]]
        name = "docs"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 5000 } }
        [[pipelines]]
        name = "p"
        stages = [{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 5000 } } }]
        "#,
    );
    let mut run = setup.start("run", &["run", "--no-progress"], &[]);
    let log = setup.log_path("run");
    assert!(run.wait_for_log(&log, "docs indexed", 2, Duration::from_secs(60)));
    signal(&run, "INT");
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(60)),
        130,
        "{}",
        setup.log("run")
    );
    let counts = setup.counts("docs");
    assert!(counts[0] < 5000, "the connector stopped: {counts:?}");
    assert_eq!(
        counts[0], counts[2],
        "every queued document finished within the grace period: {counts:?}"
    );
    assert!(
        setup.log("run").contains("INTERRUPTED"),
        "{}",
        setup.log("run")
    );
}

#[test]
fn a_second_sigint_stops_a_run_at_once() {
    let setup = Setup::new(
        "sigint_twice",
        r#"
        [runner]
        cache_dir = {cache}
        log_interval = "1s"
        grace_period = "600s"
        [publisher]
        queue_capacity = 200
        [worker]
        threads = 1
        [indexer]
        plugin = { path = @test-indexer }
        [[connectors]]
        name = "docs"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 1000 } }
        [[pipelines]]
        name = "p"
        stages = [{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 100000 } } }]
        "#,
    );
    let mut run = setup.start("run", &["run", "--no-progress"], &[]);
    let log = setup.log_path("run");
    assert!(run.wait_for_log(&log, "docs indexed", 1, Duration::from_secs(60)));
    signal(&run, "INT");
    assert!(run.wait_for_log(&log, "interrupted:", 1, Duration::from_secs(10)));
    signal(&run, "INT");
    // 200 queued documents at 100 ms each would take 20 s of grace.
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(5)), 130);
    assert!(setup.log("run").contains("stopping at once"));
}
