//! The queue source (`grants.queues`, RabbitMQ) on a real broker: each
//! behaviour of the seed's JMS trigger runner (seeds 002) has a test here,
//! mapped sentence by sentence in docs/queue-trigger.md. The backend is
//! driven through `core::messages::Source` as a run drives it; the broker is
//! inspected and fed with a native client (lapin). Queue names are unique
//! per test, so the tests share one node (`weir_tests::amqp_url`).

mod control;
mod delivery;
mod failures;
mod restarts;
mod runs;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use weir::core::messages::{Delivery, Source};
use weir::plugin::QueueGrant;
use weir::source::queue::QueueSource;

/// Long enough for anything on a loaded machine; a test that waits this
/// long has failed.
pub(crate) const PATIENCE: Duration = Duration::from_secs(90);

/// A queue name no other test (or earlier run) uses.
pub(crate) fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("weir-test-{what}-{}-{nanos}", std::process::id())
}

/// A grant of `queue` on the test broker with quick retries: batches of 10
/// collected for 50 ms, 3 attempts, a 50 ms backoff doubling to 200 ms.
pub(crate) fn grant(url: &str, queue: &str) -> QueueGrant {
    let mut grant = QueueGrant::new(url, queue);
    grant.batch_size = 10;
    grant.batch_wait = Duration::from_millis(50);
    grant.max_attempts = 3;
    grant.backoff = Duration::from_millis(50);
    grant.max_backoff = Duration::from_millis(200);
    grant
}

/// `grant` opened, once it consumes (its queue declared).
pub(crate) fn open(grant: &QueueGrant) -> QueueSource {
    let source = QueueSource::open_named(grant, "orders").expect("a valid grant opens");
    assert!(
        source.wait_for(weir::source::queue::QueueState::Running, PATIENCE),
        "the source consumes"
    );
    source
}

/// Deliveries from `source` until `n` came (or [`PATIENCE`] passed).
pub(crate) fn take(source: &dyn Source, n: usize) -> Vec<Delivery> {
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        let batch = source
            .receive(n - got.len(), Duration::from_millis(200))
            .expect("receive");
        got.extend(batch);
    }
    got
}

/// Poll `check` until it holds; false when [`PATIENCE`] passed first.
pub(crate) fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    check()
}

/// A message as the native client read it off a queue.
#[derive(Debug)]
pub(crate) struct Got {
    pub(crate) body: String,
    pub(crate) headers: BTreeMap<String, String>,
}

/// The test's own RabbitMQ client: publishes, counts and drains queues.
pub(crate) struct Amqp {
    runtime: tokio::runtime::Runtime,
    _connection: Connection,
    channel: Channel,
    pub(crate) url: String,
}

impl Amqp {
    pub(crate) fn connect(url: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let (connection, channel) = runtime.block_on(async {
            let connection = Connection::connect(url, ConnectionProperties::default())
                .await
                .expect("the test broker answers");
            let channel = connection.create_channel().await.expect("channel");
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .expect("confirms");
            (connection, channel)
        });
        Self {
            runtime,
            _connection: connection,
            channel,
            url: url.to_owned(),
        }
    }

    /// The test broker's client.
    pub(crate) fn test_broker() -> Self {
        Self::connect(weir_tests::amqp_url())
    }

    /// Declare `queue` durable and quorum, as the source does.
    pub(crate) fn declare(&self, queue: &str) {
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        self.runtime.block_on(async {
            self.channel
                .queue_declare(queue.into(), QueueDeclareOptions::durable(), args)
                .await
                .expect("declare");
        });
    }

    /// Publish each body to `exchange` with `routing_key`, persistent, each
    /// confirmed by the broker.
    pub(crate) fn publish_to(&self, exchange: &str, routing_key: &str, bodies: &[String]) {
        self.runtime.block_on(async {
            for (i, body) in bodies.iter().enumerate() {
                let mut headers = FieldTable::default();
                headers.insert("seq".into(), AMQPValue::LongLongInt(i as i64));
                let properties = BasicProperties::default()
                    .with_delivery_mode(2)
                    .with_message_id(format!("m-{i}").into())
                    .with_headers(headers);
                let confirm = self
                    .channel
                    .basic_publish(
                        exchange.into(),
                        routing_key.into(),
                        BasicPublishOptions::default(),
                        body.as_bytes(),
                        properties,
                    )
                    .await
                    .expect("publish");
                assert!(
                    confirm.await.expect("confirm").is_ack(),
                    "the broker took it"
                );
            }
        });
    }

    /// Publish each body to `queue` (through the default exchange).
    pub(crate) fn publish(&self, queue: &str, bodies: &[String]) {
        self.publish_to("", queue, bodies);
    }

    /// `(ready messages, consumers)` of `queue`.
    pub(crate) fn counts(&self, queue: &str) -> (u32, u32) {
        self.runtime.block_on(async {
            let options = QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            };
            let q = self
                .channel
                .queue_declare(queue.into(), options, FieldTable::default())
                .await
                .expect("the queue exists");
            (q.message_count(), q.consumer_count())
        })
    }

    /// Take every ready message off `queue` (acknowledged).
    pub(crate) fn drain(&self, queue: &str) -> Vec<Got> {
        self.runtime.block_on(async {
            let mut out = Vec::new();
            let options = BasicGetOptions { no_ack: true };
            while let Some(message) = self
                .channel
                .basic_get(queue.into(), options)
                .await
                .expect("get")
            {
                let delivery = message.delivery;
                let headers = weir_headers(&delivery.properties);
                out.push(Got {
                    body: String::from_utf8_lossy(&delivery.data).into_owned(),
                    headers,
                });
            }
            out
        })
    }

    pub(crate) fn delete(&self, queue: &str) {
        self.runtime.block_on(async {
            let _ = self
                .channel
                .queue_delete(queue.into(), QueueDeleteOptions::default())
                .await;
        });
    }
}

fn weir_headers(properties: &BasicProperties) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(table) = properties.headers() {
        for (k, v) in table.inner() {
            let text = match v {
                AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
                AMQPValue::LongLongInt(n) => n.to_string(),
                AMQPValue::LongInt(n) => n.to_string(),
                other => format!("{other:?}"),
            };
            out.insert(k.as_str().to_owned(), text);
        }
    }
    out
}

/// `n` bodies `{"id": "<prefix>-<i>"}`.
pub(crate) fn bodies(prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"id":"{prefix}-{i}"}}"#))
        .collect()
}

pub(crate) fn body_of(delivery: &Delivery) -> String {
    String::from_utf8_lossy(&delivery.body).into_owned()
}
