//! Failures: retries with backoff counted by the broker, dead letters with
//! Weir's headers, invalid messages dead-lettered at once, and outcomes per
//! message, never a batch failing as one.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use weir::core::messages::{Settled, Source};
use weir::source::queue::{ATTEMPTS, ERROR, FAILED_AT, SOURCE};

use super::{Amqp, bodies, body_of, eventually, grant, open, take, unique};

/// "failure below maxAttempts (the attempt number being the broker's
/// JMSXDeliveryCount ...): wait the backoff, then roll back, so the broker
/// redelivers ...; failure at maxAttempts: send each message to the
/// dead-letter queue ... with qqqError, qqqFailedTrigger, qqqAttempts and
/// qqqFailedAt properties, then commit".
#[test]
fn a_failure_is_retried_with_backoff_then_dead_lettered_with_its_cause() {
    let amqp = Amqp::test_broker();
    let queue = unique("retry");
    let mut g = grant(&amqp.url, &queue);
    g.max_attempts = 3;
    g.backoff = Duration::from_millis(300);
    g.max_backoff = Duration::from_secs(5);
    let source = open(&g);
    amqp.publish(&queue, &bodies("f", 1));
    let mut attempts = Vec::new();
    let mut failed_at = Vec::new();
    let mut delivered_at = Vec::new();
    for round in 0..3 {
        let got = take(&source, 1);
        assert_eq!(got.len(), 1, "delivery {}", round + 1);
        delivered_at.push(Instant::now());
        attempts.push(got[0].attempt);
        let error = format!("indexer said no ({})", round + 1);
        source.settle(got[0].token, Settled::Failed { error });
        failed_at.push(Instant::now());
    }
    assert_eq!(
        attempts,
        [1, 2, 3],
        "the broker's count, one more each time"
    );
    // Each retry came no sooner than its backoff (300 ms, then 600 ms).
    for (i, wait) in [(0, 300), (1, 600)] {
        let gap = delivered_at[i + 1] - failed_at[i];
        assert!(
            gap >= Duration::from_millis(wait),
            "retry {} after {gap:?}",
            i + 1
        );
    }
    let dlq = format!("{queue}.dead-letters");
    let mut dead = Vec::new();
    assert!(eventually(|| {
        dead.extend(amqp.drain(&dlq));
        !dead.is_empty()
    }));
    assert_eq!(dead.len(), 1);
    let letter = &dead[0];
    assert_eq!(letter.body, r#"{"id":"f-0"}"#, "the body as sent");
    assert_eq!(letter.headers[ERROR], "indexer said no (3)");
    assert_eq!(letter.headers[ATTEMPTS], "3");
    assert!(
        letter.headers[SOURCE].contains(&queue),
        "{:?}",
        letter.headers
    );
    assert!(
        letter.headers[FAILED_AT].ends_with('Z'),
        "{:?}",
        letter.headers
    );
    assert_eq!(letter.headers["seq"], "0", "its own headers kept");
    // The broker's count is not copied (the dead-letter queue has its own).
    let count = letter.headers.get("x-delivery-count");
    assert!(count.is_none_or(|c| c == "0"), "{:?}", letter.headers);
    assert_eq!(amqp.counts(&queue).0, 0, "not on the queue any more");
    assert_eq!(source.counts().dead_lettered.load(Ordering::Relaxed), 1);
    assert_eq!(source.counts().retried.load(Ordering::Relaxed), 2);
    source.close();
    amqp.delete(&queue);
    amqp.delete(&dlq);
}

/// "a message that isn't a CloudEvent: dead-letter it at once (qqqError
/// "unparseable message"), without retries. In a batch, the other messages
/// still run."
#[test]
fn an_invalid_message_is_dead_lettered_at_once_while_its_batch_goes_on() {
    let amqp = Amqp::test_broker();
    let queue = unique("invalid");
    let g = grant(&amqp.url, &queue);
    let source = open(&g);
    amqp.publish(&queue, &bodies("v", 5));
    let got = take(&source, 5);
    assert_eq!(got.len(), 5);
    let bad = got
        .iter()
        .find(|d| body_of(d).contains("v-2"))
        .expect("v-2");
    let reason = "not a document: expected an object".to_string();
    source.settle(
        bad.token,
        Settled::Invalid {
            reason: reason.clone(),
        },
    );
    for d in got.iter().filter(|d| d.token != bad.token) {
        source.settle(d.token, Settled::Done);
    }
    let dlq = format!("{queue}.dead-letters");
    let mut dead = Vec::new();
    assert!(eventually(|| {
        dead.extend(amqp.drain(&dlq));
        !dead.is_empty() && source.counts().acked.load(Ordering::Relaxed) == 4
    }));
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].body, r#"{"id":"v-2"}"#);
    assert_eq!(dead[0].headers[ERROR], reason);
    assert_eq!(dead[0].headers[ATTEMPTS], "1", "at once, never retried");
    assert_eq!(source.counts().retried.load(Ordering::Relaxed), 0);
    // Nothing comes again.
    assert!(
        source
            .receive(10, Duration::from_millis(500))
            .expect("receive")
            .is_empty()
    );
    assert_eq!(amqp.counts(&queue).0, 0);
    source.close();
    amqp.delete(&queue);
    amqp.delete(&dlq);
}

/// Weir does better than the seed ("A batch fails as a unit"): in a batch,
/// only the message whose documents failed goes back; the rest are
/// acknowledged.
#[test]
fn outcomes_are_per_message_not_per_batch() {
    let amqp = Amqp::test_broker();
    let queue = unique("per-message");
    let mut g = grant(&amqp.url, &queue);
    g.max_attempts = 5;
    let source = open(&g);
    amqp.publish(&queue, &bodies("p", 6));
    let got = take(&source, 6);
    assert_eq!(got.len(), 6);
    let failing = got
        .iter()
        .find(|d| body_of(d).contains("p-4"))
        .expect("p-4");
    for d in &got {
        let settled = if d.token == failing.token {
            Settled::Failed {
                error: "one document failed".into(),
            }
        } else {
            Settled::Done
        };
        source.settle(d.token, settled);
    }
    let again = take(&source, 1);
    assert_eq!(again.len(), 1);
    assert_eq!(
        body_of(&again[0]),
        r#"{"id":"p-4"}"#,
        "only the failed one comes again"
    );
    assert_eq!(again[0].attempt, 2);
    source.settle(again[0].token, Settled::Done);
    assert!(
        source
            .receive(10, Duration::from_millis(500))
            .expect("receive")
            .is_empty()
    );
    let seen: BTreeSet<String> = got.iter().map(body_of).collect();
    assert_eq!(seen.len(), 6);
    assert!(eventually(
        || source.counts().acked.load(Ordering::Relaxed) == 6
    ));
    source.close();
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}
