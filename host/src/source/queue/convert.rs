//! A RabbitMQ delivery as a `core::messages::Delivery`, and the dead letter
//! made from one (its body and headers, and Weir's own: error, source,
//! attempts, time).

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

/// Header a dead letter carries: why it failed.
pub const ERROR: &str = "weir-error";
/// Header a dead letter carries: the grant and queue it came from.
pub const SOURCE: &str = "weir-source";
/// Header a dead letter carries: the deliveries it had, the last included.
pub const ATTEMPTS: &str = "weir-attempts";
/// Header a dead letter carries: when it was dead-lettered (RFC 3339, UTC).
pub const FAILED_AT: &str = "weir-failed-at";
/// The quorum queue's count of earlier deliveries.
const DELIVERY_COUNT: &str = "x-delivery-count";

/// Which delivery this is (1 the first time): the quorum queue's
/// `x-delivery-count` (earlier deliveries) plus one; a classic queue has no
/// count, so its redelivered flag gives 2.
pub(crate) fn attempt(properties: &BasicProperties, redelivered: bool) -> u32 {
    let counted = properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(DELIVERY_COUNT))
        .and_then(number);
    match counted {
        Some(n) => u32::try_from(n.max(0))
            .unwrap_or(u32::MAX)
            .saturating_add(1),
        None if redelivered => 2,
        None => 1,
    }
}

fn number(value: &AMQPValue) -> Option<i64> {
    Some(match value {
        AMQPValue::ShortShortInt(n) => (*n).into(),
        AMQPValue::ShortShortUInt(n) => (*n).into(),
        AMQPValue::ShortInt(n) => (*n).into(),
        AMQPValue::ShortUInt(n) => (*n).into(),
        AMQPValue::LongInt(n) => (*n).into(),
        AMQPValue::LongUInt(n) => (*n).into(),
        AMQPValue::LongLongInt(n) => *n,
        _ => return None,
    })
}

/// A header's value as bytes: strings as they are, anything else as text.
fn value_bytes(value: &AMQPValue) -> Vec<u8> {
    match value {
        AMQPValue::LongString(s) => s.as_bytes().to_vec(),
        AMQPValue::ShortString(s) => s.as_str().as_bytes().to_vec(),
        AMQPValue::ByteArray(b) => b.as_slice().to_vec(),
        AMQPValue::Boolean(b) => b.to_string().into_bytes(),
        AMQPValue::Float(f) => f.to_string().into_bytes(),
        AMQPValue::Double(f) => f.to_string().into_bytes(),
        AMQPValue::Timestamp(t) => t.to_string().into_bytes(),
        other => match number(other) {
            Some(n) => n.to_string().into_bytes(),
            None => format!("{other:?}").into_bytes(),
        },
    }
}

/// The message's headers (in name order: AMQP keeps them in a table), its
/// id, and its timestamp in ms.
pub(crate) struct Parts {
    pub(crate) headers: Vec<(String, Vec<u8>)>,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) timestamp_ms: Option<i64>,
}

pub(crate) fn parts(properties: &BasicProperties) -> Parts {
    let headers = properties
        .headers()
        .as_ref()
        .map(|table| {
            table
                .inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), value_bytes(v)))
                .collect()
        })
        .unwrap_or_default();
    Parts {
        headers,
        key: properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().as_bytes().to_vec()),
        timestamp_ms: properties
            .timestamp()
            .and_then(|s| i64::try_from(s).ok())
            .map(|s| s.saturating_mul(1000)),
    }
}

/// The dead letter of a message with `properties`: its own properties and
/// headers (the broker's `x-` ones left out), persistent, and Weir's four.
pub(crate) fn dead_letter_properties(
    properties: &BasicProperties,
    error: &str,
    source: &str,
    attempts: u32,
) -> BasicProperties {
    let mut headers: FieldTable = FieldTable::default();
    if let Some(table) = properties.headers() {
        for (k, v) in table.inner() {
            if !k.as_str().starts_with("x-") {
                headers.insert(k.clone(), v.clone());
            }
        }
    }
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
    headers.insert(ShortString::from(ERROR), text(error));
    headers.insert(ShortString::from(SOURCE), text(source));
    headers.insert(
        ShortString::from(ATTEMPTS),
        AMQPValue::LongLongInt(attempts.into()),
    );
    headers.insert(
        ShortString::from(FAILED_AT),
        text(&chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
    );
    properties
        .clone()
        .with_headers(headers)
        .with_delivery_mode(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attempt_is_the_brokers_count_plus_one() {
        let plain = BasicProperties::default();
        assert_eq!(attempt(&plain, false), 1);
        assert_eq!(attempt(&plain, true), 2);
        let mut headers = FieldTable::default();
        headers.insert("x-delivery-count".into(), AMQPValue::LongLongInt(3));
        let counted = BasicProperties::default().with_headers(headers);
        assert_eq!(attempt(&counted, true), 4);
    }

    #[test]
    fn a_dead_letter_keeps_the_headers_and_adds_weirs() {
        let mut headers = FieldTable::default();
        headers.insert("x-delivery-count".into(), AMQPValue::LongLongInt(3));
        headers.insert("tenant".into(), AMQPValue::LongString("a".into()));
        let properties = BasicProperties::default()
            .with_headers(headers)
            .with_message_id("m-1".into());
        let dead = dead_letter_properties(&properties, "boom", "queues.orders (orders)", 4);
        let parts = parts(&dead);
        let names: Vec<&str> = parts.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "tenant",
                "weir-attempts",
                "weir-error",
                "weir-failed-at",
                "weir-source"
            ]
        );
        assert_eq!(parts.key.as_deref(), Some(&b"m-1"[..]));
        assert_eq!(parts.headers[1].1, b"4");
        assert_eq!(parts.headers[2].1, b"boom");
    }
}
