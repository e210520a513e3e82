//! A connector's word on how much it will publish (contract 0.2.5,
//! `progress`): the run's live counts carry it while that connector runs,
//! and the next connector starts without it.

use std::sync::Arc;

use weir::run::{Expected, RunStatus, Runner};
use weir::testing::recording::RecordingMessengers;
use weir_tests::{config, runtime};

use crate::conformance::{LANGS, component};

fn run(connectors: &str) -> Option<Expected> {
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = format!(
        r#"
        [worker]
        threads = 1
        [[pipelines]]
        name = "p"
        stages = []
        [pipelines.indexer]
        plugin = {{ path = @test-indexer, config = {{}} }}
        {connectors}
        "#
    );
    let runner = Runner::new(
        config(&toml, dir.path()),
        runtime(),
        Arc::new(RecordingMessengers::new(16)),
    );
    let result = runner.run().expect("valid");
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    runner.stats().snapshot().expected
}

#[test]
fn a_connector_that_knows_its_total_says_it_and_the_run_counts_against_it() {
    let expected = run(r#"
        [[connectors]]
        name = "gen"
        pipeline = "p"
        plugin = { path = @generator-connector, config = { count = 40 } }
        "#);
    assert_eq!(
        expected,
        Some(Expected {
            published: 40,
            total: 40
        })
    );
}

#[test]
fn the_next_connector_starts_with_no_total_and_one_that_does_not_know_says_none() {
    let expected = run(r#"
        [[connectors]]
        name = "gen"
        pipeline = "p"
        plugin = { path = @generator-connector, config = { count = 40 } }
        [[connectors]]
        name = "plain"
        pipeline = "p"
        plugin = { path = @test-connector, config = { docs = [{ id = "a" }, { id = "b" }] } }
        "#);
    assert_eq!(expected, None, "the second connector said nothing");
}

#[test]
fn every_sdk_says_a_total() {
    // The conformance connector of each language says its `count`.
    for lang in LANGS {
        let path = component(lang, "connector");
        let expected = run(&format!(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = {{ path = "{}", config = {{ count = 7, prefix = "c" }} }}
            "#,
            path.display()
        ));
        assert_eq!(
            expected,
            Some(Expected {
                published: 7,
                total: 7
            }),
            "{lang}"
        );
    }
}
