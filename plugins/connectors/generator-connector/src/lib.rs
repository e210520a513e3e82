//! generator-connector: publish `count` generated documents, or go on
//! publishing for ever (`forever`), at most `rate` a second.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use weir_plugin::outbox::Reason;
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{ConfigIssue, Connector, Outbox, PluginError, Publisher, doc_error, issue};

/// Largest `pad`: a document stays well within the default document limit.
const MAX_PAD: usize = 8 << 20;

/// Largest `rate`, documents a second.
const MAX_RATE: f64 = 1_000_000.0;

struct Generator {
    config: Config,
    /// The fields every document shares, as JSON text without its braces:
    /// rendered once, then each document's JSON is `{"n":<n>,<shared>}`.
    shared: String,
}

impl Connector for Generator {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.pad.is_some_and(|pad| pad > MAX_PAD) {
            issues.push(issue("pad", format!("at most {MAX_PAD} characters")));
        }
        for reserved in ["id", "run_id", "_children", "n"] {
            if config.fields.contains_key(reserved) {
                issues.push(issue(
                    format!("fields.{reserved}"),
                    "is set by the connector; choose another name",
                ));
            }
        }
        match (config.count, config.forever) {
            (None, false) => issues.push(issue("count", "required unless forever = true")),
            (Some(_), true) => issues.push(issue("count", "not with forever = true")),
            (Some(count), false) if config.start.checked_add(count).is_none() => {
                issues.push(issue("count", "start + count must fit in 64 bits"));
            }
            _ => {}
        }
        if let Some(rate) = config.rate
            && !(rate > 0.0 && rate <= MAX_RATE)
        {
            issues.push(issue("rate", format!("more than 0, at most {MAX_RATE}")));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        let mut shared = config.fields.clone();
        if let Some(pad) = config.pad {
            shared.insert("body".into(), Json::String("x".repeat(pad)));
        }
        let shared = Json::Object(shared).to_string();
        let shared = shared[1..shared.len() - 1].to_owned();
        Ok(Self { config, shared })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let separator = if self.shared.is_empty() { "" } else { "," };
        let start = self.config.start;
        let numbers: Box<dyn Iterator<Item = u64>> = match self.config.count {
            Some(count) if !self.config.forever => {
                weir_plugin::progress::expect(publisher, count);
                Box::new(start..start + count)
            }
            _ => Box::new((start..=u64::MAX).chain(0..start).cycle()),
        };
        let began = std::time::Instant::now();
        // Many documents to a call; one at a time when paced, so none waits
        // for the ones after it.
        let mut outbox = Outbox::new();
        for (sent, n) in numbers.enumerate() {
            if let Some(rate) = self.config.rate {
                // Document `sent` is due `sent / rate` seconds in.
                let due = std::time::Duration::from_secs_f64(sent as f64 / rate);
                if let Some(wait) = due.checked_sub(began.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            let fields = format!("{{\"n\":{n}{separator}{}}}", self.shared);
            let id = format!("{}{n}", self.config.id_prefix);
            outbox.push(&id, &fields);
            if self.config.rate.is_some() || outbox.is_full() {
                send(&mut outbox, publisher)?;
            }
        }
        send(&mut outbox, publisher)
    }
}

fn send(outbox: &mut Outbox, publisher: &Publisher) -> Result<(), PluginError> {
    outbox
        .send(publisher)
        .map_err(|refusal| match refusal.reason {
            Reason::Invalid(e) => doc_error(e),
            Reason::Refused(why) => PluginError::Fatal(why),
        })
}

weir_plugin::export_connector!(Generator);
