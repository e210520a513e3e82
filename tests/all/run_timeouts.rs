//! `runner.connector_timeout` ends the whole run on time: the connector's
//! `execute` and the stage calls in flight are stopped at the timeout, not
//! when the slowest of them returns, and a document cut short is left
//! pending, not failed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::core::event::EventKind;
use weir::run::{RunStatus, Runner};
use weir::testing::recording::RecordingMessengers;
use weir_tests::{config, runtime};

/// How late past the timeout the run may end: the runner looks every few
/// milliseconds, the stage's `stop` and the plugins' `close` still run, and
/// a loaded test machine is slow.
const SLACK: Duration = Duration::from_secs(4);

#[test]
fn a_slow_stage_call_is_stopped_at_the_connector_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The connector keeps producing (it publishes, then spins until
    // stopped); the first document sleeps a minute in a stage whose calls
    // may take two.
    let toml = r#"
        [runner]
        connector_timeout = "1s"
        [worker]
        threads = 1
        [indexer]
        batch_timeout = "10ms"
        plugin = { path = @test-indexer }
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = { path = @test-connector, config = { docs = [{ id = "slow", action = "sleep", millis = "60000" }], count = 3, hang = true } }
        [[pipelines]]
        name = "p"
        [[pipelines.stages]]
        name = "h"
        plugin = { path = @hostile-stage, limits = { call_timeout = "120s" } }
    "#;
    let messengers = RecordingMessengers::new(16);
    let recording = messengers.recording();
    let runner = Runner::new(config(toml, dir.path()), runtime(), Arc::new(messengers));
    let started = Instant::now();
    let result = runner.run().expect("valid config");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1) + SLACK,
        "the run ended {took:?} after it started, for a timeout of 1s"
    );
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(
        error.contains("connector timeout of 1s reached") && error.contains("slow"),
        "the outcome says why, and what was pending: {error}"
    );
    let failed: Vec<_> = recording
        .events()
        .into_iter()
        .filter(|e| e.kind == EventKind::Fail)
        .collect();
    assert!(
        failed.is_empty(),
        "a document cut short by the timeout is pending, not failed: {failed:?}"
    );
    assert!(recording.failed().is_empty(), "nor dead-lettered");
}
