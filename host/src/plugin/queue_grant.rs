//! `grants.queues.<name>`: a message queue a streaming connector consumes
//! (RabbitMQ over AMQP 0-9-1; the backend is `source/queue/`), with the
//! trigger runner's rules: competing consumers, batches, retries with
//! backoff counted by the broker, dead letters (docs/queue-trigger.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::problem::Problems;

/// One granted queue (or topic subscription) and how it is consumed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueGrant {
    /// The broker: `amqp://user:password@host:5672/vhost` (`amqps://` for
    /// TLS; the vhost URL-encoded, `%2f` for `/`). Give the password through
    /// a variable. The plugin never sees it.
    pub url: String,
    /// The queue consumed: every consumer of it, in this process and any
    /// other, competes for its messages. Exactly one of `queue` and `topic`.
    #[serde(default)]
    pub queue: Option<String>,
    /// A topic, consumed through a shared durable subscription.
    #[serde(default)]
    pub topic: Option<QueueTopic>,
    /// Consumers this process runs on the queue (default 2, at most 64).
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    /// Most messages `receive` hands over at once (default 100, at most 4096).
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// How long a batch collects after its first message (default `"100ms"`).
    #[serde(default = "default_batch_wait", with = "humantime_serde")]
    pub batch_wait: Duration,
    /// Messages each consumer may hold unacknowledged (default
    /// [`QueueGrant::PREFETCH_BATCHES`] times `batch_size`, at least
    /// `batch_size`, at most 65535).
    #[serde(default)]
    pub prefetch: Option<u32>,
    /// Deliveries of a message whose documents fail before it is
    /// dead-lettered, counted by the broker (default 5, 1 to 1000).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Wait before a failed message goes back to the queue: `backoff`
    /// after the first attempt, doubled after each, at most `max_backoff`
    /// (defaults `"1s"` and `"60s"`).
    #[serde(default = "default_backoff", with = "humantime_serde")]
    pub backoff: Duration,
    #[serde(default = "default_max_backoff", with = "humantime_serde")]
    pub max_backoff: Duration,
    /// Where dead letters go (default `<queue>.dead-letters`).
    #[serde(default)]
    pub dead_letter_queue: Option<String>,
    /// Declare the queue (durable, quorum), the dead-letter queue and, for a
    /// topic, its exchange and binding (default true). When false they must
    /// exist.
    #[serde(default = "yes")]
    pub declare: bool,
}

/// A topic exchange and the shared durable subscription a run reads it
/// through: a durable quorum queue `<exchange>.<subscription>` bound to it,
/// which every node's consumers share (each message once across them, kept
/// while they are down).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueTopic {
    pub exchange: String,
    /// The binding's key (default `#`: everything).
    #[serde(default = "all_keys")]
    pub routing_key: String,
    pub subscription: String,
}

fn default_concurrency() -> u32 {
    2
}
fn default_batch_size() -> u32 {
    100
}
fn default_batch_wait() -> Duration {
    Duration::from_millis(100)
}
fn default_max_attempts() -> u32 {
    5
}
fn default_backoff() -> Duration {
    Duration::from_secs(1)
}
fn default_max_backoff() -> Duration {
    Duration::from_secs(60)
}
fn yes() -> bool {
    true
}
fn all_keys() -> String {
    "#".into()
}

/// Where a grant's URL leads: what admission checks and the backend dials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueServer {
    pub host: String,
    pub port: u16,
    /// The virtual host, decoded (`/` by default).
    pub vhost: String,
    pub tls: bool,
}

impl QueueServer {
    /// `host:port`, for messages and admission (never the credentials).
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

const NAME_MAX: usize = 255;

impl QueueGrant {
    /// A grant of `queue` at `url`, every other setting its default.
    pub fn new(url: impl Into<String>, queue: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            queue: Some(queue.into()),
            topic: None,
            concurrency: default_concurrency(),
            batch_size: default_batch_size(),
            batch_wait: default_batch_wait(),
            prefetch: None,
            max_attempts: default_max_attempts(),
            backoff: default_backoff(),
            max_backoff: default_max_backoff(),
            dead_letter_queue: None,
            declare: true,
        }
    }

    /// The queue consumed: `queue`, or a topic's subscription queue.
    pub fn queue_name(&self) -> String {
        match (&self.queue, &self.topic) {
            (Some(queue), _) => queue.clone(),
            (None, Some(t)) => format!("{}.{}", t.exchange, t.subscription),
            (None, None) => String::new(),
        }
    }

    /// Batches a consumer may hold unacknowledged when `prefetch` is not
    /// set.
    pub const PREFETCH_BATCHES: u32 = 8;

    /// Where dead letters go.
    pub fn dead_letter_queue_name(&self) -> String {
        self.dead_letter_queue
            .clone()
            .unwrap_or_else(|| format!("{}.dead-letters", self.queue_name()))
    }

    /// Unacknowledged messages per consumer: `prefetch`, else
    /// [`Self::PREFETCH_BATCHES`] batches; at least a batch. A message is
    /// acknowledged only once its documents are indexed, so a consumer
    /// must be let hold several batches for the pipeline to stay full.
    pub fn prefetch_count(&self) -> u16 {
        let prefetch = self
            .prefetch
            .unwrap_or(self.batch_size.saturating_mul(Self::PREFETCH_BATCHES))
            .max(self.batch_size);
        u16::try_from(prefetch).unwrap_or(u16::MAX)
    }

    /// The wait before attempt `attempt` (1 the first) goes back to the
    /// queue after failing: `backoff * 2^(attempt-1)`, at most `max_backoff`.
    pub fn backoff_after(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        self.backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff)
    }

    /// Where the URL leads; why not, when it is not an AMQP URL (the URL
    /// itself is never in the reason: it may hold a password).
    pub fn server(&self) -> Result<QueueServer, String> {
        let (tls, rest) = if let Some(rest) = self.url.strip_prefix("amqp://") {
            (false, rest)
        } else if let Some(rest) = self.url.strip_prefix("amqps://") {
            (true, rest)
        } else {
            return Err("`url` is not an AMQP URL (`amqp://` or `amqps://`)".into());
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        let authority = authority.split_once('?').map_or(authority, |(a, _)| a);
        let place = authority.rsplit_once('@').map_or(authority, |(_, p)| p);
        let (host, port) = if let Some(v6) = place.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or("`url` has a broken IPv6 address")?;
            (host, after.strip_prefix(':'))
        } else {
            match place.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (place, None),
            }
        };
        if host.is_empty() {
            return Err("`url` names no host".into());
        }
        let port = match port {
            None | Some("") => {
                if tls {
                    5671
                } else {
                    5672
                }
            }
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| "`url` has a port that is not a number".to_string())?,
        };
        let vhost = if rest.contains('/') {
            percent_decode(path).ok_or("`url` has a broken %-escape in its vhost")?
        } else {
            "/".into()
        };
        Ok(QueueServer {
            host: host.to_ascii_lowercase(),
            port,
            vhost,
            tls,
        })
    }

    /// Everything wrong with the grant, each at `location.<key>`.
    pub fn problems(&self, location: &str) -> Problems {
        let mut out = Problems::default();
        let at = |key: &str| format!("{location}.{key}");
        if let Err(why) = self.server() {
            out.at(at("url"), why);
        }
        match (&self.queue, &self.topic) {
            (Some(_), Some(_)) => out.at(location, "give `queue` or `topic`, not both"),
            (None, None) => out.at(
                location,
                "give `queue` (a queue) or `topic` (a subscription)",
            ),
            _ => {}
        }
        let name = |out: &mut Problems, key: &str, value: &str| {
            if value.is_empty() || value.len() > NAME_MAX {
                out.at(at(key), format!("must be 1 to {NAME_MAX} bytes"));
            }
        };
        if let Some(queue) = &self.queue {
            name(&mut out, "queue", queue);
        }
        if let Some(topic) = &self.topic {
            name(&mut out, "topic.exchange", &topic.exchange);
            name(&mut out, "topic.subscription", &topic.subscription);
            name(&mut out, "topic.routing_key", &topic.routing_key);
            if topic.exchange.starts_with("amq.") && self.declare {
                // The broker's own exchanges cannot be declared.
                out.at(
                    at("topic.exchange"),
                    "`amq.` exchanges are the broker's: set `declare = false` to bind to one",
                );
            }
        }
        if let Some(dlq) = &self.dead_letter_queue {
            name(&mut out, "dead_letter_queue", dlq);
        }
        if self.queue.is_some() || self.topic.is_some() {
            if self.queue_name().len() > NAME_MAX {
                out.at(
                    location,
                    format!("the subscription's queue name is over {NAME_MAX} bytes"),
                );
            }
            if self.dead_letter_queue_name() == self.queue_name() {
                out.at(at("dead_letter_queue"), "must not be the queue consumed");
            }
        }
        let range = |out: &mut Problems, key: &str, value: u64, low: u64, high: u64| {
            if !(low..=high).contains(&value) {
                out.at(at(key), format!("must be {low} to {high} (is {value})"));
            }
        };
        range(&mut out, "concurrency", self.concurrency.into(), 1, 64);
        range(&mut out, "batch_size", self.batch_size.into(), 1, 4096);
        range(&mut out, "max_attempts", self.max_attempts.into(), 1, 1000);
        if let Some(prefetch) = self.prefetch {
            range(
                &mut out,
                "prefetch",
                prefetch.into(),
                self.batch_size.into(),
                65535,
            );
        }
        let within = |out: &mut Problems, key: &str, value: Duration, high: Duration| {
            if value > high {
                out.at(
                    at(key),
                    format!("must be at most {}", humantime::format_duration(high)),
                );
            }
        };
        within(
            &mut out,
            "batch_wait",
            self.batch_wait,
            Duration::from_secs(60),
        );
        within(&mut out, "backoff", self.backoff, Duration::from_secs(3600));
        within(
            &mut out,
            "max_backoff",
            self.max_backoff,
            Duration::from_secs(24 * 3600),
        );
        out
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_read_as_the_client_dials_it() {
        let mut grant = QueueGrant::new("amqp://u:p%40ss@Broker.example:5673/%2f", "q");
        let server = grant.server().expect("url");
        assert_eq!(server.address(), "broker.example:5673");
        assert_eq!(server.vhost, "/");
        grant.url = "amqps://rabbit".into();
        let server = grant.server().expect("url");
        assert_eq!(
            (server.port, server.vhost.as_str(), server.tls),
            (5671, "/", true)
        );
        grant.url = "amqp://[::1]:5672/tenant-a?heartbeat=10".into();
        let server = grant.server().expect("url");
        assert_eq!(
            (server.address().as_str(), server.vhost.as_str()),
            ("[::1]:5672", "tenant-a")
        );
        grant.url = "http://x".into();
        assert!(grant.server().is_err());
        grant.url = "amqp://secret-password@host:notaport".into();
        let why = grant.server().expect_err("port");
        assert!(!why.contains("secret-password"), "{why}");
    }

    #[test]
    fn problems_name_each_key() {
        let mut grant = QueueGrant::new("amqp://h", "orders");
        assert!(grant.problems("g").is_empty());
        grant.topic = Some(QueueTopic {
            exchange: "events".into(),
            routing_key: "#".into(),
            subscription: "search".into(),
        });
        grant.concurrency = 0;
        grant.batch_wait = Duration::from_secs(61);
        grant.prefetch = Some(1);
        let problems = grant.problems("g").to_string();
        for key in ["not both", "g.concurrency", "g.batch_wait", "g.prefetch"] {
            assert!(problems.contains(key), "{key} in {problems}");
        }
        grant.queue = None;
        grant.concurrency = 1;
        grant.batch_wait = Duration::ZERO;
        grant.prefetch = None;
        assert!(grant.problems("g").is_empty(), "{}", grant.problems("g"));
        assert_eq!(grant.queue_name(), "events.search");
        assert_eq!(grant.dead_letter_queue_name(), "events.search.dead-letters");
    }

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let mut grant = QueueGrant::new("amqp://h", "q");
        grant.backoff = Duration::from_millis(100);
        grant.max_backoff = Duration::from_millis(350);
        let waits: Vec<u128> = (1..=4)
            .map(|a| grant.backoff_after(a).as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 350, 350]);
        assert_eq!(grant.prefetch_count(), 800, "8 batches of 100");
        grant.batch_size = 10_000;
        assert_eq!(grant.prefetch_count(), u16::MAX, "the protocol's bound");
    }
}
