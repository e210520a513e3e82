//! What crosses the topics: a document too large for them fails alone, a
//! worker that cannot hand one on stops (its records redelivered), parents
//! never complete before their children, and a message that is not a
//! document fails its id.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use weir_tests::Proc;

use super::{RECORDING_INDEXER, Setup, client, kafka_config, read_until};

#[test]
fn a_document_over_the_topics_message_limit_fails_alone() {
    // The broker takes at most 64 KiB on these topics, far below
    // kafka.max_message_bytes: the worker reads the limit from the broker.
    let setup = Setup::new(
        "limit",
        &kafka_config(
            r#"{ docs = [{ id = "small-1", action = "ok" }, { id = "large", action = "grow", count = "1" }, { id = "small-2", action = "ok" }] }"#,
            r#"{ name = "hostile", plugin = { path = @hostile-stage } }"#,
            r#"topic_config = { "max.message.bytes" = "65536" }"#,
            "",
            "plugin = { path = @test-indexer }",
        ),
    );
    let (mut worker, mut indexer) = (
        setup.start("worker", &["worker"], &[]),
        setup.start("indexer", &["indexer"], &[]),
    );
    let mut run = setup.run_kafka();
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(120)),
        3,
        "{}",
        setup.log("run")
    );
    assert_eq!(setup.counts("docs")[..4], [3, 0, 2, 1]);
    let log = setup.log("worker");
    assert!(
        log.contains("the broker accepts smaller messages") && log.contains("65536"),
        "the worker read the broker's limit:\n{log}"
    );
    assert!(!log.contains("delivery to"), "no delivery failed:\n{log}");
    // The run's event topic went with the run.
    let topic = format!("{}_event_{}", setup.pipeline, setup.run_id());
    let consumer: BaseConsumer = client(&setup).create().expect("consumer");
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumer
        .fetch_metadata(Some(&topic), Duration::from_secs(10))
        .expect("metadata")
        .topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none())
    {
        assert!(Instant::now() < deadline, "{topic} was not deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(worker.stop() && indexer.stop(), "both stop cleanly");
}

#[test]
fn a_worker_that_cannot_hand_a_document_on_stops_and_its_records_are_redelivered() {
    // The worker's producer refuses messages over 1,000 bytes (the broker
    // would take them): producing fails, and the worker must stop rather
    // than skip the documents.
    let body = kafka_config(
        "{ count = 20, pad = 2000 }",
        r#"{ name = "copy", plugin = { path = @copy-fields, config = { mappings = [{ source = "n", target = "m" }] } } }"#,
        "",
        r#"liveness_timeout = "4s""#,
        RECORDING_INDEXER,
    );
    let setup = Setup::new("refused", &body);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let strict = [(
        "WEIR__KAFKA__PRODUCER__MESSAGE.MAX.BYTES",
        r#""1000""#.to_owned(),
    )];
    let mut worker = setup.start("worker", &["worker"], &strict);
    let mut run = setup.run_kafka();
    assert_eq!(
        setup.exit_code_of(&mut worker, Duration::from_secs(60)),
        1,
        "{}",
        setup.log("worker")
    );
    assert!(
        setup.log("worker").contains("cannot produce"),
        "{}",
        setup.log("worker")
    );
    // Nobody processes the pipeline any more: the run ends stalled, naming
    // what is pending, long before its connector timeout.
    assert_eq!(setup.exit_code(&mut run, Duration::from_secs(60)), 1);
    let log = setup.log("run");
    assert!(
        log.contains("stalled: no live worker serves pipeline") && log.contains("doc-"),
        "{log}"
    );
    assert!(setup.indexed().is_empty(), "nothing was skipped past");
    // A worker that can produce gets every record again.
    let mut fixed = setup.start("worker-2", &["worker"], &[]);
    setup.wait_until_indexed(20);
    assert!(fixed.stop() && indexer.stop());
}

#[test]
fn parents_never_complete_a_run_before_their_children_are_indexed() {
    // Children spread over six partitions and two indexers, through a slow
    // stage; the run's Success must mean every child is indexed.
    let parents: Vec<String> = (0..6)
        .map(|i| format!(r#"{{ id = "p{i}", action = "children", count = "25" }}"#))
        .collect();
    let setup = Setup::new(
        "children",
        &kafka_config(
            &format!("{{ docs = [{}] }}", parents.join(", ")),
            r#"{ name = "make", plugin = { path = @hostile-stage } },
               { name = "done", plugin = { path = @rename-fields, config = { mappings = [{ source = "action", target = "made" }] } } },
               { name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 2000 } } }"#,
            "delete_event_topics = false",
            "",
            RECORDING_INDEXER,
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let indexers: Vec<Proc> = (0..2)
        .map(|i| {
            setup.start(
                &format!("indexer-{i}"),
                &["indexer"],
                &[(
                    "WEIR__INDEXER__PLUGIN__CONFIG__RECORD",
                    format!("/out/indexer-{i}.jsonl"),
                )],
            )
        })
        .collect();
    for trial in 0..3 {
        for file in std::fs::read_dir(setup.dir.path().join("out")).expect("out") {
            std::fs::remove_file(file.expect("file").path()).expect("remove");
        }
        let mut run = setup.run_kafka();
        assert_eq!(
            setup.exit_code(&mut run, Duration::from_secs(120)),
            0,
            "trial {trial}: {}",
            setup.log("run")
        );
        let indexed = setup.indexed().len();
        assert_eq!(
            indexed,
            6 * 26,
            "trial {trial}: the run succeeded with {indexed} of 156 documents indexed"
        );
        assert_eq!(setup.counts("docs"), [6, 150, 156, 0, 0, 0]);
    }
    // The events of the last run: each parent's FINISH names the pass that
    // made its children, and comes after its 25 CREATEs.
    let run_id = setup.run_id();
    let mut creates: HashMap<u64, u32> = HashMap::new();
    let mut finishes: Vec<(String, u64, u64)> = Vec::new();
    read_until(&setup, &format!("{}_event_{run_id}", setup.pipeline), |m| {
        let events: serde_json::Value =
            serde_json::from_slice(m.payload().unwrap_or_default()).expect("events");
        for e in events.as_array().expect("an array") {
            let id = e["document_id"].as_str().expect("id");
            match (e["kind"].as_str(), id.contains("-child-")) {
                (Some("CREATE"), _) => {
                    *creates
                        .entry(e["attempt"].as_u64().expect("a CREATE names its pass"))
                        .or_default() += 1;
                }
                (Some("FINISH"), false) => finishes.push((
                    id.to_owned(),
                    e["attempt"].as_u64().expect("the parent's pass"),
                    e["after_creates"].as_u64().expect("its CREATE count"),
                )),
                _ => {}
            }
        }
        finishes.len() >= 6
    });
    for (parent, attempt, after) in &finishes {
        assert_eq!(*after, 25, "{parent}");
        assert_eq!(
            creates.get(attempt),
            Some(&25),
            "{parent}'s pass made 25 children"
        );
    }
    assert!(worker.stop());
    for mut indexer in indexers {
        assert!(indexer.stop());
    }
}

#[test]
fn a_message_that_is_not_a_document_fails_its_id_and_is_dead_lettered() {
    let setup = Setup::new(
        "garbage",
        &kafka_config(
            "{ count = 1 }",
            "",
            r#"event_topic = "{pipeline}_events""#,
            "",
            "plugin = { path = @test-indexer }",
        ),
    );
    let mut worker = setup.start("worker", &["worker"], &[]);
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let producer: BaseProducer = client(&setup).create().expect("producer");
    for (topic, key) in [("source", "bad-source"), ("dest", "bad-dest")] {
        let headers = OwnedHeaders::new().insert(Header {
            key: "weir.run_id",
            value: Some("run-7"),
        });
        let topic = format!("{}_{topic}", setup.pipeline);
        producer
            .send(
                BaseRecord::to(&topic)
                    .key(key)
                    .payload("{not json")
                    .headers(headers),
            )
            .expect("produce");
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    let mut failed: Vec<String> = Vec::new();
    read_until(&setup, &format!("{}_events", setup.pipeline), |m| {
        let events: serde_json::Value =
            serde_json::from_slice(m.payload().unwrap_or_default()).expect("events");
        for e in events.as_array().expect("an array") {
            assert_eq!(e["kind"], "FAIL", "{e}");
            assert_eq!(e["run_id"], "run-7", "{e}");
            assert!(
                e["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("not a Weir document"),
                "{e}"
            );
            failed.push(e["document_id"].as_str().expect("id").to_owned());
        }
        failed.len() >= 2
    });
    failed.sort();
    assert_eq!(failed, ["bad-dest", "bad-source"]);
    let mut dead: Vec<String> = Vec::new();
    read_until(&setup, &format!("{}_fail", setup.pipeline), |m| {
        let error = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == "weir.error"))
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        assert!(error.contains("not a Weir document"), "{error}");
        assert_eq!(
            m.payload(),
            Some(&b"{not json"[..]),
            "the bytes as they came"
        );
        dead.push(String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned());
        dead.len() >= 2
    });
    assert!(worker.stop() && indexer.stop());
}
