//! A document that kills its worker is quarantined after max_deliveries;
//! replay reads a pipeline's fail topic back.

use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;

use super::{RECORDING_INDEXER, Setup, client, kafka_config};

#[test]
fn a_document_that_kills_its_worker_is_quarantined_after_max_deliveries() {
    // `poison` is published first (the first record of its partition); a
    // worker taking it sleeps in the stage and is killed there, as if the
    // document had crashed it.
    let setup = Setup::new(
        "poison",
        &kafka_config(
            r#"{ docs = [{ id = "poison", action = "sleep", millis = "600000" }], count = 30 }"#,
            r#"{ name = "hostile", plugin = { path = @hostile-stage } }"#,
            "max_deliveries = 2",
            "",
            RECORDING_INDEXER,
        ),
    );
    let mut indexer = setup.start("indexer", &["indexer"], &[]);
    let mut run = setup.run_kafka();
    // Two worker threads: a process that dies also leaves the record its
    // other thread had in hand unfinished. Those bystanders must not be
    // quarantined: past max_deliveries a record gets one delivery alone in
    // its process, and only one that dies alone too is set aside.
    let two_threads = [("WEIR__WORKER__THREADS", "2".to_owned())];
    for delivery in 1..=3 {
        let name = format!("worker-{delivery}");
        let mut worker = setup.start(&name, &["worker"], &two_threads);
        assert!(
            worker.wait_for_log(
                &setup.log_path(&name),
                "sleeping on poison",
                1,
                Duration::from_secs(120)
            ),
            "delivery {delivery}:\n{}",
            setup.log(&name)
        );
        worker.kill_hard();
    }
    assert!(
        setup.log("worker-3").contains("processed alone"),
        "{}",
        setup.log("worker-3")
    );
    // The fourth worker sets it aside without processing it.
    let mut worker = setup.start("worker-4", &["worker"], &two_threads);
    assert_eq!(
        setup.exit_code(&mut run, Duration::from_secs(180)),
        3,
        "{}",
        setup.log("run")
    );
    let log = setup.log("worker-4");
    assert!(
        log.contains("quarantined") && !log.contains("sleeping on poison"),
        "{log}"
    );
    assert_eq!(setup.counts("docs")[..4], [31, 0, 30, 1]);
    let indexed = setup.indexed();
    assert!(!indexed.iter().any(|l| l.contains("\"poison\"")));
    // On the fail topic, as it came, with why.
    let consumer: BaseConsumer = client(&setup)
        .set("group.id", format!("check-{}", setup.pipeline))
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer
        .subscribe(&[&format!("{}_fail", setup.pipeline)])
        .expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(60);
    let letter = loop {
        assert!(Instant::now() < deadline, "no dead letter");
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(500)) {
            break message.detach();
        }
    };
    assert_eq!(letter.key(), Some(&b"poison"[..]));
    let error = letter
        .headers()
        .and_then(|h| {
            h.iter()
                .find(|h| h.key == "weir.error")
                .and_then(|h| h.value)
        })
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default();
    assert!(
        error.contains("delivered 3 times") && error.contains("the last time alone"),
        "{error}"
    );
    // Only the culprit is on the fail topic.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            panic!(
                "a bystander was set aside: {:?}",
                message.key().map(String::from_utf8_lossy)
            );
        }
    }
    assert!(worker.stop() && indexer.stop());
}

#[test]
fn replay_reads_a_pipelines_fail_topic_back_through_a_pipeline() {
    let body = kafka_config(
        r#"{ docs = [{ id = "x", action = "fail", n = 7 }, { id = "y", action = "ok" }] }"#,
        r#"{ name = "hostile", plugin = { path = @hostile-stage } }"#,
        "",
        "",
        RECORDING_INDEXER,
    ) + "\n[[pipelines]]\nname = \"fixed\"\n";
    let setup = Setup::new("replay", &body);
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
    assert!(worker.stop() && indexer.stop());
    // `x` is on the fail topic; a pipeline without the failing stage takes it.
    let mut replay = setup.start(
        "replay",
        &[
            "replay",
            "--no-progress",
            "--fail-topic",
            &setup.pipeline,
            "--pipeline",
            "fixed",
        ],
        &[],
    );
    assert_eq!(
        setup.exit_code_of(&mut replay, Duration::from_secs(120)),
        0,
        "{}",
        setup.log("replay")
    );
    assert!(
        setup.log("replay").contains("replaying 1 dead letter"),
        "{}",
        setup.log("replay")
    );
    let replayed: Vec<String> = setup
        .indexed()
        .into_iter()
        .filter(|l| l.contains("\"x\""))
        .collect();
    assert_eq!(replayed.len(), 1, "{replayed:?}");
}
