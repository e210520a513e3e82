//! Control of one process's consumers: pause, resume, restart, and stop
//! rolling back what is in flight.

use std::sync::atomic::Ordering;
use std::time::Duration;

use weir::core::messages::{ReceiveError, Settled, Source};
use weir::source::queue::QueueState;

use super::{Amqp, PATIENCE, bodies, body_of, eventually, grant, open, take, unique};

/// "Pausing closes the consumers ... so messages stay on the broker. A
/// batch being collected is cut short by a pause"; "resumeLocal".
#[test]
fn pause_closes_the_consumers_and_resume_takes_the_messages_again() {
    let amqp = Amqp::test_broker();
    let queue = unique("pause");
    let mut g = grant(&amqp.url, &queue);
    g.concurrency = 2;
    let source = open(&g);
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    assert!(eventually(|| amqp.counts(&queue).1 == 2));
    // One message in flight when the pause comes: it is not lost and can
    // still be acknowledged.
    amqp.publish(&queue, &bodies("before", 1));
    let held = take(&source, 1);
    assert_eq!(held.len(), 1);
    source.pause();
    assert!(source.wait_for(QueueState::Paused, PATIENCE));
    // (A quorum queue counts a cancelled consumer until what it holds is
    // settled.)
    source.settle(held[0].token, Settled::Done);
    assert!(eventually(
        || source.counts().acked.load(Ordering::Relaxed) == 1
    ));
    assert!(
        eventually(|| amqp.counts(&queue).1 == 0),
        "no consumer while paused"
    );
    amqp.publish(&queue, &bodies("during", 20));
    assert!(
        source
            .receive(10, Duration::from_millis(300))
            .expect("receive")
            .is_empty(),
        "nothing is handed out while paused"
    );
    assert_eq!(amqp.counts(&queue).0, 20, "the messages wait on the broker");
    source.resume();
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    let got = take(&source, 20);
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|d| body_of(d).contains("during")));
    for d in &got {
        source.settle(d.token, Settled::Done);
    }
    assert!(eventually(
        || source.counts().acked.load(Ordering::Relaxed) == 21
    ));
    source.close();
    assert!(eventually(|| amqp.counts(&queue) == (0, 0)));
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}

/// "Restarting makes each worker build a new session and consumer"; "A
/// paused trigger stays paused"; "right after restartLocal, the state is
/// CONNECTING until the consumers are rebuilt".
#[test]
fn restart_rebuilds_the_consumers_and_keeps_a_pause() {
    let amqp = Amqp::test_broker();
    let queue = unique("restart");
    let g = grant(&amqp.url, &queue);
    let source = open(&g);
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    amqp.publish(&queue, &bodies("r", 3));
    let held = take(&source, 1);
    assert_eq!(held.len(), 1);
    let connects = source.counts().connects.load(Ordering::Relaxed);
    source.restart();
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    // Its consumers are new, on the same connection; what was in flight
    // before can still be acknowledged.
    assert_eq!(source.counts().connects.load(Ordering::Relaxed), connects);
    source.settle(held[0].token, Settled::Done);
    let rest = take(&source, 2);
    assert_eq!(rest.len(), 2);
    for d in &rest {
        source.settle(d.token, Settled::Done);
    }
    assert!(eventually(
        || source.counts().acked.load(Ordering::Relaxed) == 3
    ));
    source.pause();
    assert!(source.wait_for(QueueState::Paused, PATIENCE));
    source.restart();
    assert!(!source.wait_for(QueueState::Running, Duration::from_millis(500)));
    assert_eq!(
        source.state(),
        QueueState::Paused,
        "a paused source stays paused"
    );
    source.resume();
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    source.close();
    assert!(eventually(|| amqp.counts(&queue) == (0, 0)));
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}

/// "Stopping ... rolls their messages back, so they are redelivered after
/// the next start - not lost, and not counted as failures."
#[test]
fn stop_rolls_back_what_is_in_flight_not_as_a_failure() {
    let amqp = Amqp::test_broker();
    let queue = unique("stop");
    let mut g = grant(&amqp.url, &queue);
    g.max_attempts = 1;
    let source = open(&g);
    amqp.publish(&queue, &bodies("s", 8));
    let got = take(&source, 8);
    assert_eq!(got.len(), 8);
    source.close();
    assert_eq!(
        source.receive(10, Duration::from_millis(10)),
        Err(ReceiveError::Stopping)
    );
    // A settle after the stop changes nothing: it went back.
    source.settle(
        got[0].token,
        Settled::Failed {
            error: "late".into(),
        },
    );
    let counts = source.counts();
    assert_eq!(counts.dead_lettered.load(Ordering::Relaxed), 0);
    assert_eq!(counts.retried.load(Ordering::Relaxed), 0);
    assert_eq!(counts.returned.load(Ordering::Relaxed), 8);
    assert!(
        eventually(|| amqp.counts(&queue) == (8, 0)),
        "all back on the queue"
    );
    // Even with max_attempts = 1, the next start takes them again: a stop
    // is no failed attempt, and nothing was dead-lettered.
    let next = open(&g);
    let again = take(&next, 8);
    assert_eq!(again.len(), 8);
    for d in &again {
        next.settle(d.token, Settled::Done);
    }
    assert!(eventually(
        || next.counts().acked.load(Ordering::Relaxed) == 8
    ));
    assert!(amqp.drain(&format!("{queue}.dead-letters")).is_empty());
    next.close();
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}
