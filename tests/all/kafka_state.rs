//! Connector state kept on Kafka (a compacted topic per pipeline): read
//! back in log order a message at a time, so that state grown past
//! `limits.max_state_mib` is refused as a run reads it, before it is held.

use weir::core::state::{StateChange, StateError, StateStores};
use weir::messenger::kafka::KafkaStates;
use weir_tests::{kafka_bootstrap, with_plugins};

fn states() -> KafkaStates {
    KafkaStates::new(weir::config::KafkaConfig::new(kafka_bootstrap()))
}

fn pipeline(name: &str) -> String {
    format!("{name}_{:08x}", fastrand::u32(..))
}

fn set(key: &str, value: &str) -> StateChange {
    (key.to_owned(), Some(value.to_owned()))
}

/// The store hands over each message of its connector as it is in the log
/// (a tombstone as a removal, other connectors' keys left out), stops at
/// the first error the loader returns, and clears only its connector.
#[test]
fn kafka_state_is_handed_over_in_log_order() {
    let states = states();
    let pipeline = pipeline("state_order");
    let open = |connector| states.open(&pipeline, connector).expect("store");
    let log = vec![
        set("a", "1"),
        set("b", "2"),
        ("a".to_owned(), None),
        set("c", "3"),
        set("b", "4"),
    ];
    open("c").commit(&log).expect("committed");
    open("other").commit(&[set("a", "x")]).expect("committed");

    let mut read = Vec::new();
    open("c")
        .load_each(&mut |change| {
            read.push(change);
            Ok(())
        })
        .expect("loaded");
    assert_eq!(read, log);
    let mut state = open("c").load().expect("loaded");
    state.sort();
    assert_eq!(state, [("b".into(), "4".into()), ("c".into(), "3".into())]);

    // A loader's refusal ends the read there.
    let mut handed = 0;
    let refused = open("c").load_each(&mut |_| {
        handed += 1;
        if handed == 2 {
            Err(StateError::new("too much"))
        } else {
            Ok(())
        }
    });
    assert_eq!(refused, Err(StateError::new("too much")));
    assert_eq!(handed, 2);

    open("c").clear().expect("cleared");
    assert!(open("c").load().expect("loaded").is_empty());
    assert_eq!(
        open("other").load().expect("loaded"),
        [("a".into(), "x".into())]
    );
}

/// State on the topic past the connector's `limits.max_state_mib` (kept
/// under a looser one, or written by hand) stops a Kafka-mode run as it is
/// read, naming the limit and the key in log order it was at.
#[test]
fn kafka_state_past_the_limit_is_refused_as_a_run_loads_it() {
    let states = states();
    let pipeline = pipeline("state_limit");
    // 20,000 keys of 8 bytes: 200 bytes each as the host holds them, ~4 MB.
    let keys: Vec<StateChange> = (0..20_000).map(|n| set(&format!("k{n:07}"), "")).collect();
    states
        .open(&pipeline, "c")
        .and_then(|mut store| store.commit(&keys))
        .expect("seeded");

    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        with_plugins(&format!(
            r#"
            [runner]
            cache_dir = {cache:?}
            [kafka]
            bootstrap_servers = {bootstrap:?}
            [[connectors]]
            name = "c"
            pipeline = "{pipeline}"
            plugin = {{ path = @test-connector, config = {{ count = 1 }}, limits = {{ max_state_mib = 1 }} }}
            [[pipelines]]
            name = "{pipeline}"
            [indexer]
            plugin = {{ path = @test-indexer }}
            "#,
            cache = dir.path().join("cache").display().to_string(),
            bootstrap = kafka_bootstrap(),
        )),
    )
    .expect("config");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir-under-test"))
        .args(["run", "--mode", "kafka", "--no-progress"])
        .arg(&config)
        .output()
        .expect("weir run");
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{log}");
    // Refused at the first key past 1 MiB (5,243 x 200 bytes), in the
    // order the keys were written.
    assert!(
        log.contains("cannot be read")
            && log.contains("limits.max_state_mib = 1 ")
            && log.contains("1048600 bytes with 5243 keys read when key `k0005242` came"),
        "{log}"
    );
}
