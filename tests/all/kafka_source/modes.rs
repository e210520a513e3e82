//! The Kafka topic source in Kafka mode: the connector reads the topic in
//! the runner, Hybrid worker–indexer pairs in a process of their own index
//! its documents through the cluster, and the topic's offsets follow the
//! events that come back: every record indexed, the offsets committed to
//! the end while the run goes on, and records produced later taken too.

use std::collections::HashSet;

use super::{Run, Topic, produce};

#[test]
fn in_kafka_mode_offsets_follow_documents_indexed_by_another_process() {
    let topic = Topic::new("ks_mode", 3);
    let n = 3_000;
    produce(&topic, 0, n);
    let run = Run::in_kafka_mode(&topic, r#", id = "origin""#);
    let pairs = std::cell::RefCell::new(run.serve("pairs", "hybrid"));
    let mut proc = run.start("run");
    let distinct = |r: &Run| {
        assert!(
            matches!(pairs.borrow_mut().child.try_wait(), Ok(None)),
            "the pairs' process ended:\n{}",
            r.log("pairs")
        );
        r.indexed()
            .iter()
            .filter_map(|d| d["id"].as_str().map(str::to_owned))
            .collect::<HashSet<String>>()
            .len()
    };
    run.wait(&mut proc, "run", "every record indexed", |r| {
        distinct(r) >= n
    });
    run.wait(&mut proc, "run", "the offsets committed to the end", |_| {
        topic.committed().values().sum::<i64>() == n as i64
    });
    // The run goes on: what comes later is read too.
    produce(&topic, n, n + 500);
    run.wait(&mut proc, "run", "the later records indexed", |r| {
        distinct(r) >= n + 500
    });
    run.wait(&mut proc, "run", "their offsets committed", |_| {
        topic.committed().values().sum::<i64>() == (n + 500) as i64
    });
    let log = run.log("run");
    assert!(
        !proc.stop(),
        "SIGTERM interrupts a run that never ends:\n{log}"
    );
    assert!(
        log.contains("source opened"),
        "the runner read the topic:\n{log}"
    );
    let all = run.indexed().len();
    assert_eq!(distinct(&run), n + 500, "0 lost");
    eprintln!(
        "kafka source in Kafka mode: {} records, {} duplicates",
        n + 500,
        all - (n + 500)
    );
}
