//! What a tenant's `grants.queues` may reach under `weir serve`: brokers
//! its policy lists (`queues`, entries as in `http`: the host and port of
//! the grant's URL), virtual hosts it allows (`queue_vhosts`; empty: any),
//! and queues, exchanges and dead-letter queues whose names it allows
//! (`queue_names`: exact, or a prefix ending in `*`). So no tenant consumes,
//! binds to or dead-letters into another's broker, vhost or queues.

use super::operator::TenantPolicy;
use crate::plugin::{HttpAllow, QueueGrant};

/// Whether `name` matches one of `patterns` (exact, or `prefix*`).
fn named(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == p,
    })
}

/// What `grant` asks that `tenant` may not have: `(key below the grant,
/// why)` each. The URL itself (its password) is never in a reason.
pub(crate) fn forbidden(grant: &QueueGrant, tenant: &TenantPolicy) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match grant.server() {
        Err(why) => out.push(("url".to_owned(), why)),
        Ok(server) => {
            let address = server.address();
            let reachable = tenant
                .queues
                .iter()
                .filter_map(|entry| HttpAllow::parse(entry).ok())
                .any(|allowed| HttpAllow::parse(&address).is_ok_and(|w| allowed.covers(&w)));
            if !reachable {
                out.push((
                    "url".to_owned(),
                    format!(
                        "`{address}` is not a queue broker tenant `{}` may reach",
                        tenant.name
                    ),
                ));
            }
            if !tenant.queue_vhosts.is_empty() && !tenant.queue_vhosts.contains(&server.vhost) {
                out.push((
                    "url".to_owned(),
                    format!(
                        "virtual host `{}` is not one tenant `{}` may use",
                        server.vhost, tenant.name
                    ),
                ));
            }
        }
    }
    let mut names = vec![
        ("queue", grant.queue_name()),
        ("dead_letter_queue", grant.dead_letter_queue_name()),
    ];
    if let Some(topic) = &grant.topic {
        names[0].0 = "topic.subscription";
        names.push(("topic.exchange", topic.exchange.clone()));
    }
    for (key, name) in names {
        if !named(&name, &tenant.queue_names) {
            out.push((
                key.to_owned(),
                format!("`{name}` is not a name tenant `{}` may use", tenant.name),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::QueueTopic;

    fn tenant() -> TenantPolicy {
        toml::from_str(
            "name = \"acme\"\ntoken_env = \"A\"\npipelines = [\"a\"]\nplugins = []\n\
             queues = [\"rabbit.internal:5672\"]\nqueue_vhosts = [\"acme\"]\nqueue_names = [\"acme.*\"]",
        )
        .expect("a tenant policy")
    }

    #[test]
    fn a_tenant_reaches_its_brokers_vhosts_and_queues_only() {
        let ok = QueueGrant::new("amqp://u:secret@rabbit.internal/acme", "acme.orders");
        assert!(
            forbidden(&ok, &tenant()).is_empty(),
            "{:?}",
            forbidden(&ok, &tenant())
        );
        let other = QueueGrant::new("amqp://u:secret@rabbit.other:5672/%2f", "other.orders");
        let found = forbidden(&other, &tenant());
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["url", "url", "queue", "dead_letter_queue"]);
        assert!(found.iter().all(|(_, why)| !why.contains("secret")));
        let mut topic = ok.clone();
        topic.queue = None;
        topic.topic = Some(QueueTopic {
            exchange: "other.events".into(),
            routing_key: "#".into(),
            subscription: "search".into(),
        });
        let keys: Vec<String> = forbidden(&topic, &tenant())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            ["topic.subscription", "dead_letter_queue", "topic.exchange"]
        );
        // A default policy reaches nothing.
        let mut none = tenant();
        none.queues.clear();
        none.queue_names.clear();
        assert_eq!(forbidden(&ok, &none).len(), 3);
    }
}
