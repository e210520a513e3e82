//! Runs that cannot finish end stalled, naming what is pending, instead of
//! waiting out their timeout; a lost broker is logged once.

use std::time::{Duration, Instant};

use super::{RECORDING_INDEXER, Setup, kafka_config};

#[test]
fn a_pipeline_nobody_serves_ends_stalled_naming_what_is_pending() {
    // An indexer, but no worker.
    let setup = Setup::new(
        "unserved",
        &kafka_config(
            "{ count = 30 }",
            "",
            "",
            r#"liveness_timeout = "3s""#,
            "plugin = { path = @test-indexer }",
        ),
    );
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no live worker serves pipeline")
            && log.contains("with 30 documents pending (first: doc-0, doc-1")
            && log.contains("indexer ")
            && log.contains("serving"),
        "{log}"
    );
    assert!(indexer.stop());
}

#[test]
fn a_worker_killed_and_never_restarted_ends_the_run_stalled() {
    let setup = Setup::new(
        "killed",
        &kafka_config(
            "{ count = 400 }",
            r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 20000 } } }"#,
            "",
            r#"liveness_timeout = "4s""#,
            RECORDING_INDEXER,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    setup.wait_until_indexed(20);
    worker.kill_hard();
    let killed = Instant::now();
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no live worker serves pipeline")
            && log.contains("documents pending (first: doc-")
            && log.contains("worker ")
            && log.contains("last heard"),
        "{log}"
    );
    let noticed = killed.elapsed();
    println!(
        "a killed worker noticed {noticed:?} after the kill (liveness timeout 4 s; connector timeout 600 s)"
    );
    // Its silence counts from its last heartbeat, not from when the runner
    // first missed it (which doubled the timeout), and the log says how long.
    assert!(noticed < Duration::from_secs(8), "{noticed:?}");
    assert!(
        log.contains("none heard from for 4s") || log.contains("none heard from for 5s"),
        "{log}"
    );
    assert!(indexer.stop());
}

#[test]
fn a_lost_broker_is_logged_once_not_on_every_poll() {
    let setup = Setup::new(
        "lost",
        &kafka_config(
            "{ count = 1 }",
            "",
            "",
            "",
            "plugin = { path = @test-indexer }",
        )
        .replace(
            "bootstrap_servers = {bootstrap}",
            r#"bootstrap_servers = "127.0.0.1:1""#,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let log = setup.log_path("worker");
    assert!(
        worker.wait_for_log(&log, "waiting for Kafka", 1, Duration::from_secs(90)),
        "a serving process waits for the cluster:\n{}",
        setup.log("worker")
    );
    // Three more seconds of retries (librdkafka reconnects every few ms).
    assert!(!worker.wait_for_log(&log, "not a line it writes", 1, Duration::from_secs(3)));
    let text = setup.log("worker");
    let errors = text.lines().filter(|l| l.contains("ERROR")).count();
    assert_eq!(errors, 1, "one line for the outage:\n{text}");
    assert!(text.contains("lost Kafka"), "{text}");
    assert!(worker.stop(), "it stops while waiting:\n{text}");
}

#[test]
fn documents_that_never_finish_end_a_local_run_stalled() {
    // The backend is down for good and the indexer retries without end:
    // nothing finishes, and the run says so instead of waiting a day.
    let setup = Setup::new(
        "stalled",
        r#"
        [runner]
        cache_dir = {cache}
        stall_timeout = "3s"
        [indexer]
        max_retries = 1000000
        retry_backoff = "20ms"
        retry_max_backoff = "100ms"
        plugin = { path = @test-indexer, config = { batch_failures = 1000000, connection_failed = true }, limits = { call_timeout = "1s" } }
        [[connectors]]
        name = "docs"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 12 } }
        [[pipelines]]
        name = "p"
        "#,
    );
    let mut run = setup.start("run", &["run", "--no-progress"], &[]);
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no document finished for 3s with 12 documents pending (first: doc-0, doc-1, doc-10"),
        "{log}"
    );
}
