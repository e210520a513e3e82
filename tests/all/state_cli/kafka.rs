//! `weir state --mode kafka`: the state Kafka mode keeps on each
//! pipeline's compacted state topic, shown as it is read back and reset
//! by tombstones; a topic that does not exist is said so, not made.

use serde_json::Value;
use weir::core::state::StateStores;
use weir::messenger::kafka::KafkaStates;
use weir_tests::kafka_bootstrap;

use super::{Folder, ids};

#[test]
fn kafka_state_is_shown_and_reset_by_tombstones() {
    let folder = Folder::new();
    folder.source("in.jsonl", &ids("k", 3));
    let pipeline = format!("statecli_{:08x}", fastrand::u32(..));
    let settings = format!(
        "[kafka]\nbootstrap_servers = {:?}\n[state]\nid = \"books\"",
        kafka_bootstrap()
    );
    let config = folder.config("books", "in.jsonl", &settings);
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replace("\"p\"", &format!("{pipeline:?}"));
    std::fs::write(&config, text).expect("config");
    let path = config.to_str().expect("path");
    let states = KafkaStates::new(weir::config::KafkaConfig::new(kafka_bootstrap()));

    // No topic yet: said so, and none is made.
    let none = folder.weir(&["state", "show", "--mode", "kafka", path]);
    assert_eq!(none.code, 1);
    assert!(
        none.err.contains("does not exist") && none.err.contains(&format!("{pipeline}_state")),
        "{}",
        none.err
    );
    assert!(
        !states.exists(&pipeline).expect("asked"),
        "show made no topic"
    );

    // What a Kafka-mode run of the sync keeps: its keys (one removed on
    // the way), its meta, another sync's keys beside it.
    let open = |scope: &str| states.open(&pipeline, scope).expect("store");
    let set = |k: &str, v: &str| (k.to_owned(), Some(v.to_owned()));
    open("books/source")
        .commit(&[
            set("a", "1"),
            set("b", "2"),
            set("c", "3"),
            ("b".to_owned(), None),
        ])
        .expect("committed");
    open("books/source#meta")
        .commit(&[set("source", "0123456789abcdef"), set("generation", "42")])
        .expect("committed");
    open("other/source")
        .commit(&[set("x", "9")])
        .expect("committed");

    let shown = folder.weir(&["state", "show", "--json", "--mode", "kafka", path]);
    assert_eq!(shown.code, 0);
    let shown: Value = serde_json::from_str(&shown.out).expect("JSON");
    let sync = &shown["syncs"][0];
    assert_eq!(sync["sync"], format!("{pipeline}/books/source"), "{sync}");
    assert_eq!(
        (&sync["keys"], &sync["bytes"]),
        (&Value::from(2), &Value::from(4))
    );
    assert_eq!(
        (&sync["generation"], &sync["source_changed"]),
        (&Value::from(42), &Value::from(true))
    );
    assert!(
        sync["kept_in"]
            .as_str()
            .expect("where")
            .contains("Kafka topic"),
        "{sync}"
    );

    let reset = folder.weir(&["state", "reset", "--yes", "--mode", "kafka", path]);
    assert_eq!(reset.code, 0);
    assert!(reset.out.contains("2 keys"), "{}", reset.out);
    assert!(open("books/source").load().expect("loaded").is_empty());
    assert!(open("books/source#meta").load().expect("loaded").is_empty());
    assert_eq!(
        open("other/source").load().expect("loaded").len(),
        1,
        "another sync untouched"
    );
}
