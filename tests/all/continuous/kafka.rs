//! A continuous run in Kafka mode (Hybrid pairs in a process of their
//! own), against the real broker: SIGTERM drains it through the topics,
//! nothing is lost, its state (on the pipeline's state topic) is committed,
//! and the next run goes on from it.

const REPORT: &str = "continuous connector `source` after";

use super::{Forever, LONG, contiguous, ended_within, signal, summary_row};

#[test]
fn sigterm_drains_a_continuous_kafka_run_and_the_next_goes_on_from_its_state() {
    let bootstrap = weir_tests::kafka_bootstrap();
    let forever = Forever::new(
        &format!(
            r#"
            [runner]
            grace_period = "300s"
            report_every = "1s"
            liveness_timeout = "120s"
            [worker]
            threads = 2
            [kafka]
            bootstrap_servers = {bootstrap:?}
            topic_partitions = 4
            consumer = {{ "session.timeout.ms" = "6000", "heartbeat.interval.ms" = "1000" }}
            "#
        ),
        "rate = 1000.0",
        "",
        "",
    );
    let _pairs = forever.serve("pairs", "worker-indexer");
    let run_in = |name: &str, more: usize| {
        let mut run = forever.run(name);
        let before = forever.indexed().len();
        forever.wait_indexed(&mut run, name, before + more);
        assert!(
            run.wait_for_log(&forever.log_path(name), REPORT, 1, LONG),
            "a report line each second:\n{}",
            forever.log(name)
        );
        signal(&run, libc::SIGTERM);
        let status = ended_within(&mut run, LONG).expect("it drains and ends");
        let log = forever.log(name);
        assert_eq!(status.code(), Some(130), "interrupted:\n{log}");
        (before, summary_row(&log, "source"))
    };
    let (_, row) = run_in("first", 500);
    assert_eq!(row["published"], row["succeeded"], "{row:?}");
    assert_eq!(row["failed"] + row["dropped"], 0, "{row:?}");
    let indexed = forever.indexed();
    let last = contiguous(&indexed, 0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(last + 1, row["published"], "doc-0 to doc-{last}");

    let (before, _) = run_in("second", 200);
    let all = forever.indexed();
    let from = all[before..].iter().min().copied().expect("indexed");
    assert!(
        from == last + 1 || from == last,
        "the second run starts at doc-{from}, after doc-{last} (pipeline {})",
        forever.pipeline
    );
    contiguous(&all, 0).unwrap_or_else(|e| panic!("{e}"));
}
