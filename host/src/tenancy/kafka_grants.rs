//! What a tenant's `grants.kafka` may reach under `weir serve`: brokers its
//! policy lists (`kafka`, entries as in `http`), topics and consumer groups
//! whose names its policy allows (`kafka_names`: exact, or a prefix ending
//! in `*`), and only client properties that reach nothing more (no files,
//! no commands, no other servers). So no tenant reads another's cluster,
//! topics or group offsets.

use super::operator::TenantPolicy;
use crate::plugin::{HttpAllow, KafkaGrant};

/// Client properties a tenant may set: credentials and fetch tuning.
/// Anything else (`ssl.ca.location` reads a file of the host,
/// `sasl.kerberos.kinit.cmd` runs a command, ...) is refused.
const TENANT_PROPERTIES: [&str; 12] = [
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "max.partition.fetch.bytes",
    "queued.max.messages.kbytes",
];

/// Whether `name` matches one of `patterns` (exact, or `prefix*`).
fn named(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == p,
    })
}

/// What `grant` asks that `tenant` may not have: `(key below the grant,
/// why)` each.
pub(crate) fn forbidden(grant: &KafkaGrant, tenant: &TenantPolicy) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let reachable: Vec<HttpAllow> = tenant
        .kafka
        .iter()
        .filter_map(|entry| HttpAllow::parse(entry).ok())
        .collect();
    for broker in grant
        .brokers
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
    {
        let why = match HttpAllow::parse(broker) {
            Ok(wanted) if reachable.iter().any(|r| r.covers(&wanted)) => continue,
            Ok(_) => format!(
                "`{broker}` is not a Kafka broker tenant `{}` may reach",
                tenant.name
            ),
            Err(e) => e.to_string(),
        };
        out.push(("brokers".to_owned(), why));
    }
    for (i, topic) in grant.topics.iter().enumerate() {
        if !named(topic, &tenant.kafka_names) {
            out.push((
                format!("topics[{i}]"),
                format!(
                    "topic `{topic}` is not one tenant `{}` may read",
                    tenant.name
                ),
            ));
        }
    }
    if !named(&grant.group, &tenant.kafka_names) {
        out.push((
            "group".to_owned(),
            format!(
                "consumer group `{}` is not one tenant `{}` may use",
                grant.group, tenant.name
            ),
        ));
    }
    for key in grant.properties.keys() {
        if !TENANT_PROPERTIES.contains(&key.as_str()) {
            out.push((
                format!("properties.{key}"),
                format!(
                    "a tenant may set only these client properties: {}",
                    TENANT_PROPERTIES.join(", ")
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant() -> TenantPolicy {
        toml::from_str(
            "name = \"acme\"\ntoken_env = \"A\"\npipelines = [\"a\"]\nplugins = []\n\
             kafka = [\"kafka.acme.internal:9092\"]\nkafka_names = [\"acme.*\", \"shared-orders\"]",
        )
        .expect("a tenant policy")
    }

    fn grant(brokers: &str, topics: &[&str], group: &str) -> KafkaGrant {
        KafkaGrant {
            brokers: brokers.into(),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            group: group.into(),
            start: Default::default(),
            properties: Default::default(),
        }
    }

    #[test]
    fn a_tenant_reaches_its_brokers_topics_and_groups_only() {
        let ok = grant(
            "kafka.acme.internal:9092",
            &["acme.orders", "shared-orders"],
            "acme.search",
        );
        assert!(forbidden(&ok, &tenant()).is_empty());
        let other = grant(
            "kafka.acme.internal:9092,kafka.other:9092",
            &["other.orders", "acme.x"],
            "other.search",
        );
        let keys: Vec<String> = forbidden(&other, &tenant())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["brokers", "topics[0]", "group"]);
        // A default policy reaches nothing.
        let mut none = tenant();
        none.kafka.clear();
        none.kafka_names.clear();
        assert_eq!(forbidden(&ok, &none).len(), 4);
    }

    #[test]
    fn properties_that_reach_files_or_commands_are_refused() {
        let mut g = grant("kafka.acme.internal:9092", &["acme.orders"], "acme.g");
        g.properties.insert("sasl.username".into(), "u".into());
        g.properties
            .insert("ssl.ca.location".into(), "/etc/shadow".into());
        g.properties
            .insert("sasl.kerberos.kinit.cmd".into(), "sh -c id".into());
        let keys: Vec<String> = forbidden(&g, &tenant())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "properties.sasl.kerberos.kinit.cmd",
                "properties.ssl.ca.location"
            ]
        );
    }
}
