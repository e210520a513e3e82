//! What becomes of a delivery once the run settles it, on the broker, when
//! it is not simply done (those are acknowledged together, [`super::acks`]):
//! rejected back to the queue after a backoff (a counted attempt),
//! dead-lettered with Weir's headers, or requeued (abandoned). Each is sent
//! alone, and its tag leaves its channel's open set once it is.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lapin::Confirmation;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicPublishOptions, BasicRejectOptions};

use super::{InFlight, Incoming, Shared, convert};
use crate::core::messages::Settled;

/// Settle `message` as `settled` (a task on the source's runtime).
pub(super) async fn settle(shared: Arc<Shared>, message: InFlight, settled: Settled) {
    // The channel stays open (held by `acks`) until the message is settled.
    let InFlight {
        delivery,
        acks,
        attempt,
    } = message;
    match settled {
        Settled::Done => {
            // One way to acknowledge: with the done deliveries around it.
            let tag = delivery.delivery_tag;
            if acks.done(delivery.acker, tag) {
                super::acks::flush(shared, acks).await;
            }
            return;
        }
        Settled::Failed { error } if attempt >= shared.grant.max_attempts => {
            dead_letter(&shared, &delivery, &error, attempt).await;
        }
        Settled::Failed { error } => {
            // Back to the queue after the backoff (cut short when the source
            // closes: the attempt still counts), as a rejection, which the
            // broker counts in x-delivery-count.
            let wait = shared.grant.backoff_after(attempt);
            backoff(&shared, wait).await;
            tracing::debug!(source = %shared.label, attempt, %error, "a failed message goes back to its queue");
            let requeue = BasicRejectOptions { requeue: true };
            if delivery.acker.reject(requeue).await.is_ok() {
                shared.counts.retried.fetch_add(1, Ordering::Relaxed);
            }
        }
        Settled::Invalid { reason } => {
            dead_letter(&shared, &delivery, &reason, attempt).await;
        }
        Settled::Abandoned => return_to_queue(&shared, &delivery.acker).await,
    }
    acks.released(delivery.delivery_tag);
}

/// Back to the queue, not a failure: the run stopped, paused or restarted
/// before it was done (a nack; see docs/queue-trigger.md for how the broker
/// counts it).
pub(super) async fn give_back(shared: Arc<Shared>, incoming: Incoming) {
    return_to_queue(&shared, &incoming.delivery.acker).await;
    incoming.acks.released(incoming.delivery.delivery_tag);
}

async fn return_to_queue(shared: &Shared, acker: &lapin::Acker) {
    let requeue = BasicNackOptions {
        multiple: false,
        requeue: true,
    };
    if acker.nack(requeue).await.is_ok() {
        shared.counts.returned.fetch_add(1, Ordering::Relaxed);
    }
}

/// Wait `wait`, or less once the source is closing.
async fn backoff(shared: &Shared, wait: Duration) {
    let mut wanted = shared.wanted.subscribe();
    let _ = tokio::time::timeout(wait, wanted.wait_for(|w| w.closed)).await;
}

/// Publish the message to the dead-letter queue (its body, headers and
/// Weir's), wait for the broker's confirm, then acknowledge it. When either
/// fails it goes back to the queue, to be dead-lettered on a later delivery.
async fn dead_letter(
    shared: &Shared,
    delivery: &lapin::message::Delivery,
    error: &str,
    attempts: u32,
) {
    let properties =
        convert::dead_letter_properties(&delivery.properties, error, &shared.label, attempts);
    let queue = shared.grant.dead_letter_queue_name();
    let confirmed = {
        let publisher = shared.publisher.lock().await;
        match publisher.as_ref() {
            Some(channel) => {
                match channel
                    .basic_publish(
                        "".into(),
                        queue.as_str().into(),
                        // Mandatory: a dead-letter queue that is not there
                        // is an answer, not a silent drop.
                        BasicPublishOptions {
                            mandatory: true,
                            ..BasicPublishOptions::default()
                        },
                        &delivery.data,
                        properties,
                    )
                    .await
                {
                    Ok(confirm) => Some(confirm),
                    Err(e) => {
                        tracing::warn!(source = %shared.label, error = %e, "cannot publish a dead letter");
                        None
                    }
                }
            }
            None => None,
        }
    };
    // Stored: confirmed, and not returned as unroutable.
    let stored = match confirmed {
        Some(confirm) => matches!(confirm.await, Ok(Confirmation::Ack(None))),
        None => false,
    };
    if stored {
        if delivery.acker.ack(BasicAckOptions::default()).await.is_ok() {
            shared.counts.dead_lettered.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(source = %shared.label, dead_letter_queue = %queue, attempts, %error, "message dead-lettered");
        }
    } else {
        // It comes again, and is dead-lettered then: after the backoff, or
        // a dead-letter queue that refuses it would make a hot loop.
        tracing::warn!(source = %shared.label, dead_letter_queue = %queue, "the dead-letter queue did not take the message (missing, full or refusing): it goes back to its queue after the backoff");
        backoff(shared, shared.grant.backoff_after(attempts)).await;
        return_to_queue(shared, &delivery.acker).await;
    }
}
