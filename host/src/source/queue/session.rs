//! The queue source's one supervising task: connect (never blocking the
//! run: CONNECTING, a retry every second), declare, start `concurrency`
//! consumers, and rebuild them when the connection or a consumer is lost,
//! on a restart and after a pause; on close, return what is buffered, let
//! what is being settled finish (2 s at most) and close the connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, BasicQosOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use tokio::sync::{mpsc, watch};

use super::{Incoming, QueueState, Shared, Wanted, settle};

/// How often a source that cannot connect tries again.
const RETRY: Duration = Duration::from_secs(1);
/// Longest one step of connecting may take before it counts as failed.
const STEP: Duration = Duration::from_secs(10);

pub(super) async fn supervise(shared: Arc<Shared>) {
    let mut wanted = shared.wanted.subscribe();
    let mut connection: Option<Connection> = None;
    let mut last_error: Option<String> = None;
    let mut generation = 0u64;
    let mut last: Vec<Channel> = Vec::new();
    loop {
        let now: Wanted = *wanted.borrow_and_update();
        if now.closed {
            break;
        }
        if now.paused {
            shared.set_state(QueueState::Paused);
            if wanted.changed().await.is_err() {
                break;
            }
            continue;
        }
        shared.set_state(QueueState::Connecting);
        let conn = match connection.take().filter(|c| c.status().connected()) {
            Some(conn) => conn,
            None => match connect(&shared).await {
                Ok(conn) => conn,
                Err(e) => {
                    report(&shared, &mut last_error, e);
                    wait_or_change(&mut wanted, RETRY).await;
                    continue;
                }
            },
        };
        generation += 1;
        let (ended, mut lost) = mpsc::unbounded_channel();
        let consumers = match consume(&shared, &conn, generation, ended).await {
            Ok(consumers) => consumers,
            Err(e) => {
                report(&shared, &mut last_error, e);
                connection = Some(conn);
                wait_or_change(&mut wanted, RETRY).await;
                continue;
            }
        };
        if last_error.take().is_some() {
            tracing::info!(source = %shared.label, "connected");
        }
        shared.set_state(QueueState::Running);
        connection = Some(conn);
        let was_lost = tokio::select! {
            _ = lost.recv() => true,
            changed = wanted.changed() => changed.is_err(),
        };
        // Retire this generation's consumers: no more deliveries to them;
        // their channels stay open while a delivery of theirs is in flight.
        for (channel, tag) in &consumers {
            if channel.status().connected() {
                let cancel =
                    channel.basic_cancel(tag.as_str().into(), BasicCancelOptions::default());
                let _ = tokio::time::timeout(STEP, cancel).await;
            }
        }
        if wanted.borrow().closed {
            // Closed explicitly at the end, before the connection.
            last = consumers.into_iter().map(|(channel, _)| channel).collect();
        }
        return_buffer(&shared).await;
        if was_lost {
            let alive = connection.as_ref().is_some_and(|c| c.status().connected());
            tracing::warn!(source = %shared.label, connection_alive = alive, "a consumer was lost: reconnecting");
            if alive {
                // Only a channel went (a deleted queue, a refused ack): not
                // at once, or a queue that is gone would spin.
                wait_or_change(&mut wanted, RETRY).await;
            }
        }
    }
    return_buffer(&shared).await;
    let abandoned: Vec<super::InFlight> = shared
        .in_flight
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain()
        .map(|(_, m)| m)
        .collect();
    for message in abandoned {
        settle::settle(
            shared.clone(),
            message,
            crate::core::messages::Settled::Abandoned,
        )
        .await;
    }
    // Let acknowledgements and returns in progress reach the broker.
    let deadline = Instant::now() + Duration::from_secs(2);
    while shared.pending.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    last.extend(shared.publisher.lock().await.take());
    for channel in last {
        if channel.status().connected() {
            let _ = tokio::time::timeout(STEP, channel.close(200, "closed".into())).await;
        }
    }
    if let Some(conn) = connection {
        let _ =
            tokio::time::timeout(Duration::from_secs(2), conn.close(200, "closed".into())).await;
    }
    shared.set_state(QueueState::Closed);
}

/// Log a connecting error when it is new (not every second).
fn report(shared: &Shared, last: &mut Option<String>, error: String) {
    if last.as_deref() != Some(error.as_str()) {
        tracing::warn!(source = %shared.label, %error, "cannot consume the queue yet: retrying every second");
        *last = Some(error);
    }
}

async fn wait_or_change(wanted: &mut watch::Receiver<Wanted>, wait: Duration) {
    let _ = tokio::time::timeout(wait, wanted.changed()).await;
}

/// Put back on the queue what consumers took and no batch did.
async fn return_buffer(shared: &Arc<Shared>) {
    let buffered: Vec<Incoming> = shared.buffer.1.try_iter().collect();
    for incoming in buffered {
        settle::give_back(shared.clone(), incoming).await;
    }
}

async fn step<T>(what: &str, future: impl Future<Output = lapin::Result<T>>) -> Result<T, String> {
    match tokio::time::timeout(STEP, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer in {}s", STEP.as_secs())),
    }
}

/// A connection, with the queues declared and a channel (confirms on) for
/// dead letters.
async fn connect(shared: &Shared) -> Result<Connection, String> {
    let mut uri: AMQPUri = shared
        .grant
        .url
        .parse()
        .map_err(|_: String| "`url` is not an AMQP URL".to_string())?;
    // A broker that stops answering is noticed within ~20 s.
    uri.query.heartbeat.get_or_insert(10);
    uri.query
        .connection_timeout
        .get_or_insert(STEP.as_millis() as u64);
    let name = LongString::from(format!("weir {}", shared.label).into_bytes());
    let properties = ConnectionProperties::default().with_connection_name(name);
    let address = shared
        .grant
        .server()
        .map(|s| s.address())
        .unwrap_or_default();
    let conn = step(
        &format!("connecting to {address}"),
        Connection::connect_uri(uri, properties),
    )
    .await?;
    shared.counts.connects.fetch_add(1, Ordering::Relaxed);
    let channel = step("opening a channel", conn.create_channel()).await?;
    if shared.grant.declare {
        declare(shared, &channel).await?;
    }
    step(
        "turning on publisher confirms",
        channel.confirm_select(ConfirmSelectOptions::default()),
    )
    .await?;
    *shared.publisher.lock().await = Some(channel);
    Ok(conn)
}

/// The queue (durable, quorum: the broker counts deliveries), the
/// dead-letter queue and, for a topic, its exchange and the binding.
async fn declare(shared: &Shared, channel: &Channel) -> Result<(), String> {
    let mut quorum = FieldTable::default();
    quorum.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let queue = shared.queue.as_str();
    let declared = channel.queue_declare(queue.into(), durable, quorum.clone());
    step(&format!("declaring queue `{queue}`"), declared).await?;
    let dlq = shared.grant.dead_letter_queue_name();
    let declared = channel.queue_declare(dlq.as_str().into(), durable, quorum);
    step(&format!("declaring queue `{dlq}`"), declared).await?;
    if let Some(topic) = &shared.grant.topic {
        let options = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        let exchange = topic.exchange.as_str();
        let declared = channel.exchange_declare(
            exchange.into(),
            ExchangeKind::Topic,
            options,
            FieldTable::default(),
        );
        step(&format!("declaring exchange `{exchange}`"), declared).await?;
        let bound = channel.queue_bind(
            queue.into(),
            exchange.into(),
            topic.routing_key.as_str().into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        );
        step(&format!("binding `{queue}` to `{exchange}`"), bound).await?;
    }
    Ok(())
}

/// `concurrency` consumers, each on a channel of its own with the prefetch
/// bound, feeding the buffer; each tells `ended` when its stream ends.
async fn consume(
    shared: &Arc<Shared>,
    conn: &Connection,
    generation: u64,
    ended: mpsc::UnboundedSender<()>,
) -> Result<Vec<(Channel, String)>, String> {
    let mut consumers = Vec::new();
    for i in 0..shared.grant.concurrency {
        let made = async {
            let channel = step("opening a channel", conn.create_channel()).await?;
            let qos = channel.basic_qos(shared.grant.prefetch_count(), BasicQosOptions::default());
            step("setting the prefetch", qos).await?;
            let tag = format!("weir-{}-{generation}-{i}", std::process::id());
            let consumer = channel.basic_consume(
                shared.queue.as_str().into(),
                tag.as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            );
            let consumer = step(&format!("consuming queue `{}`", shared.queue), consumer).await?;
            Ok::<_, String>((channel, tag, consumer))
        };
        match made.await {
            Ok((channel, tag, mut consumer)) => {
                let acks = super::acks::ChannelAcks::new(channel.clone());
                let feed = shared.buffer.0.clone();
                let ended = ended.clone();
                tokio::spawn(async move {
                    while let Some(next) = consumer.next().await {
                        let Ok(delivery) = next else { break };
                        acks.delivered(delivery.delivery_tag);
                        let incoming = Incoming {
                            delivery,
                            acks: acks.clone(),
                        };
                        if feed.send(incoming).is_err() {
                            break;
                        }
                    }
                    let _ = ended.send(());
                });
                consumers.push((channel, tag));
            }
            Err(e) => {
                for (channel, _) in consumers {
                    let _ = tokio::time::timeout(STEP, channel.close(200, "retrying".into())).await;
                }
                return Err(e);
            }
        }
    }
    Ok(consumers)
}
