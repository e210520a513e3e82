//! Consuming: competing consumers, shared durable subscriptions, the
//! number of consumers, batches, and acknowledgement only when done.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use weir::core::messages::{Settled, Source};
use weir::plugin::QueueTopic;
use weir::source::queue::QueueState;

use super::{Amqp, PATIENCE, bodies, body_of, eventually, grant, open, take, unique};

/// "Queue triggers use createConsumer (the workers, and other nodes,
/// compete for messages)": two sources on one queue (as two processes
/// would be: each its own connection) share its messages, each message
/// once between them.
#[test]
fn consumers_on_one_queue_compete_each_message_once() {
    let amqp = Amqp::test_broker();
    let queue = unique("compete");
    let mut g = grant(&amqp.url, &queue);
    g.concurrency = 1;
    g.prefetch = Some(10);
    let a = open(&g);
    let b = open(&g);
    assert!(a.wait_for(QueueState::Running, PATIENCE) && b.wait_for(QueueState::Running, PATIENCE));
    amqp.publish(&queue, &bodies("c", 200));
    let mut seen = Vec::new();
    let (mut from_a, mut from_b) = (0, 0);
    let deadline = Instant::now() + PATIENCE;
    while seen.len() < 200 && Instant::now() < deadline {
        for (source, count) in [(&a, &mut from_a), (&b, &mut from_b)] {
            let batch = source
                .receive(10, Duration::from_millis(50))
                .expect("receive");
            *count += batch.len();
            for d in batch {
                seen.push(body_of(&d));
                source.settle(d.token, Settled::Done);
            }
        }
    }
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(
        (seen.len(), distinct.len()),
        (200, 200),
        "each message once"
    );
    assert!(
        from_a > 0 && from_b > 0,
        "both competed: {from_a} and {from_b}"
    );
    a.close();
    b.close();
    assert!(
        eventually(|| amqp.counts(&queue) == (0, 0)),
        "all acknowledged"
    );
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}

/// "topic triggers use createSharedDurableConsumer on the trigger's
/// effective subscription name (so each message is processed once across
/// all nodes, and is kept while they are down)".
#[test]
fn a_topic_subscription_is_shared_and_kept_while_every_node_is_down() {
    let amqp = Amqp::test_broker();
    let exchange = unique("events");
    let mut g = grant(&amqp.url, "unused");
    g.queue = None;
    g.topic = Some(QueueTopic {
        exchange: exchange.clone(),
        routing_key: "order.*".into(),
        subscription: "search".into(),
    });
    let subscription = g.queue_name();
    // The first node declares the subscription, then every node is down.
    let first = open(&g);
    assert!(first.wait_for(QueueState::Running, PATIENCE));
    first.close();
    amqp.publish_to(&exchange, "order.created", &bodies("t", 50));
    amqp.publish_to(&exchange, "invoice.created", &bodies("other", 5));
    assert_eq!(
        amqp.counts(&subscription),
        (50, 0),
        "kept while down; only what the key binds"
    );
    // Two nodes come back: each message once across them.
    let a = open(&g);
    let b = open(&g);
    let mut seen = BTreeSet::new();
    let mut total = 0;
    assert!(eventually(|| {
        for source in [&a, &b] {
            for d in source
                .receive(10, Duration::from_millis(20))
                .expect("receive")
            {
                total += 1;
                seen.insert(body_of(&d));
                source.settle(d.token, Settled::Done);
            }
        }
        seen.len() == 50
    }));
    assert_eq!(total, 50, "no message twice");
    a.close();
    b.close();
    amqp.delete(&subscription);
    amqp.delete(&format!("{subscription}.dead-letters"));
}

/// "the runner starts `concurrency` workers, each ... with its own ...
/// consumer".
#[test]
fn concurrency_is_the_number_of_consumers_on_the_queue() {
    let amqp = Amqp::test_broker();
    let queue = unique("concurrency");
    let mut g = grant(&amqp.url, &queue);
    g.concurrency = 3;
    let source = open(&g);
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    assert!(
        eventually(|| amqp.counts(&queue).1 == 3),
        "{:?}",
        amqp.counts(&queue)
    );
    source.close();
    assert!(
        eventually(|| amqp.counts(&queue).1 == 0),
        "closing cancels them"
    );
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}

/// "in BATCH mode, each batch: up to batchSize messages, or what arrives
/// within batchWaitMs of the first".
#[test]
fn a_batch_is_batch_size_or_what_comes_within_batch_wait_of_the_first() {
    let amqp = Amqp::test_broker();
    let queue = unique("batch");
    let mut g = grant(&amqp.url, &queue);
    g.batch_size = 7;
    g.batch_wait = Duration::from_millis(300);
    let source = open(&g);
    assert!(source.wait_for(QueueState::Running, PATIENCE));
    amqp.publish(&queue, &bodies("b", 30));
    // Full batches: never more than batch_size, whatever max asks.
    let mut sizes = Vec::new();
    let mut got = 0;
    assert!(eventually(|| {
        let batch = source
            .receive(100, Duration::from_millis(100))
            .expect("receive");
        if !batch.is_empty() {
            sizes.push(batch.len());
        }
        got += batch.len();
        for d in batch {
            source.settle(d.token, Settled::Done);
        }
        got == 30
    }));
    assert!(sizes.iter().all(|&n| n <= 7), "{sizes:?}");
    assert!(
        sizes.iter().filter(|&&n| n == 7).count() >= 1,
        "some batches are full: {sizes:?}"
    );
    // A lone message: the batch closes batch_wait after it, not after the
    // (long) wait for a first message.
    amqp.publish(&queue, &bodies("lone", 1));
    let asked = Instant::now();
    let batch = source.receive(100, PATIENCE).expect("receive");
    assert_eq!(batch.len(), 1);
    assert!(
        asked.elapsed() < PATIENCE / 2,
        "returned once the batch wait ended"
    );
    source.settle(batch[0].token, Settled::Done);
    source.close();
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}

/// "success: commit (acknowledge)": a message is acknowledged only once the
/// run says it is done; one that never was comes again after the consumer
/// goes, and is acknowledged for good when it is done.
#[test]
fn a_message_is_acknowledged_only_when_its_documents_are_done() {
    let amqp = Amqp::test_broker();
    let queue = unique("ack");
    let g = grant(&amqp.url, &queue);
    let source = open(&g);
    amqp.publish(&queue, &bodies("a", 4));
    let got = take(&source, 4);
    assert_eq!(got.len(), 4);
    // Two done, two still being indexed when the source goes away.
    source.settle(got[0].token, Settled::Done);
    source.settle(got[1].token, Settled::Done);
    assert!(eventually(|| source
        .counts()
        .acked
        .load(std::sync::atomic::Ordering::Relaxed)
        == 2));
    assert_eq!(amqp.counts(&queue).0, 0, "nothing is ready while held");
    source.close();
    let again = open(&g);
    let back = take(&again, 2);
    let back_bodies: BTreeSet<String> = back.iter().map(body_of).collect();
    let expected: BTreeSet<String> = got[2..].iter().map(body_of).collect();
    assert_eq!(back_bodies, expected, "only the two not done come again");
    for d in &back {
        again.settle(d.token, Settled::Done);
    }
    again.close();
    assert!(eventually(|| amqp.counts(&queue) == (0, 0)));
    let third = open(&g);
    assert!(third.wait_for(QueueState::Running, PATIENCE));
    assert!(
        third
            .receive(10, Duration::from_millis(500))
            .expect("receive")
            .is_empty()
    );
    third.close();
    amqp.delete(&queue);
    amqp.delete(&format!("{queue}.dead-letters"));
}
