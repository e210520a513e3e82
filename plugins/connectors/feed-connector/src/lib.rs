//! feed-connector: one document per item of RSS 2.0 and Atom feeds, sending
//! only what is new or changed on later runs.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
pub mod parse;

use std::collections::HashSet;
use std::time::Duration;

use config::Config;
use parse::Item;
use sha2::{Digest, Sha256};
use weir_plugin::http::{Request, Response, Retry, Url, send_with_retries};
use weir_plugin::serde_json::{self, Value as Json, json};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue, sync};

/// Tries of a request answered 429 or 5xx, or not answered.
const TRIES: u32 = 4;
/// State keys: a feed's validators, an item's fingerprint.
const FEED_KEY: &str = "feed:";
const ITEM_KEY: &str = "item:";

/// A feed's validators, kept between runs.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Validators {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_modified: Option<String>,
}

/// An item sent, kept between runs.
#[derive(serde::Serialize, serde::Deserialize)]
struct Sent {
    fingerprint: String,
    feed: String,
}

struct Feeds {
    config: Config,
    /// Item keys listed this run, and the feeds answered 304.
    seen: HashSet<String>,
    unchanged_feeds: HashSet<String>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Feeds {
    /// A GET of `url`, tried again on 429, 5xx and no answer.
    fn get(&self, url: &str, headers: &[(&str, String)]) -> Result<Response, PluginError> {
        let parsed = Url::parse(url).map_err(PluginError::Fatal)?;
        let max = usize::try_from(self.config.max_feed_mib << 20).unwrap_or(usize::MAX);
        let request = || {
            let mut request = Request::get(&parsed)
                .header("user-agent", &self.config.user_agent)
                .header(
                    "accept",
                    "application/rss+xml, application/atom+xml, application/xml;q=0.9, */*;q=0.8",
                )
                .timeout(Duration::from_secs(self.config.timeout_secs))
                .max_body(max);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            request
        };
        send_with_retries(
            TRIES,
            request,
            |retry| match retry {
                Retry::Status(response) => format!("feed {url} answered {}", response.status),
                Retry::Unreachable(why) => format!("feed {url} is unreachable: {why}"),
            },
            |why| {
                PluginError::Fatal(format!(
                    "feed {url}: {why} (is its host granted in grants.http?)"
                ))
            },
        )
    }

    fn sync_feed(&mut self, publisher: &Publisher, url: &str) -> Result<(), PluginError> {
        let incremental = self.config.incremental;
        let full = sync::full_sync();
        let feed_key = format!("{FEED_KEY}{url}");
        let mut headers = Vec::new();
        if incremental
            && !full
            && let Some(kept) = sync::get(&feed_key)
            && let Ok(kept) = serde_json::from_str::<Validators>(&kept)
        {
            if let Some(etag) = kept.etag {
                headers.push(("if-none-match", etag));
            }
            if let Some(modified) = kept.last_modified {
                headers.push(("if-modified-since", modified));
            }
        }
        let response = self.get(url, &headers)?;
        if response.status == 304 && !headers.is_empty() {
            weir_plugin::info!("feed {url} is unchanged");
            self.unchanged_feeds.insert(url.to_owned());
            return Ok(());
        }
        if !response.ok() {
            return Err(PluginError::Fatal(format!(
                "feed {url} answered {}",
                response.status
            )));
        }
        let feed = parse::parse(&response.text())
            .map_err(|e| PluginError::Fatal(format!("feed {url}: {e}")))?;
        let mut sent = 0;
        for item in &feed.items {
            let Some(key) = item.key() else {
                weir_plugin::warn!("an item of feed {url} has no guid, id or link: skipped");
                continue;
            };
            let state_key = format!("{ITEM_KEY}{key}");
            if !self.seen.insert(state_key.clone()) {
                continue;
            }
            let body =
                serde_json::to_string(item).map_err(|e| PluginError::Fatal(e.to_string()))?;
            let fingerprint = hex(&Sha256::digest(body.as_bytes()));
            if incremental
                && !full
                && sync::get(&state_key)
                    .and_then(|v| serde_json::from_str::<Sent>(&v).ok())
                    .is_some_and(|s| s.fingerprint == fingerprint)
            {
                continue;
            }
            self.publish(publisher, url, feed.title.as_deref(), key, item)?;
            sent += 1;
            if incremental {
                let value = serde_json::to_string(&Sent {
                    fingerprint,
                    feed: url.to_owned(),
                })
                .map_err(|e| PluginError::Fatal(e.to_string()))?;
                sync::set(&state_key, &value)?;
            }
        }
        weir_plugin::info!(
            "feed {url}: {} items, {sent} new or changed",
            feed.items.len()
        );
        if incremental {
            let validators = Validators {
                etag: response.header("etag").map(str::to_owned),
                last_modified: response.header("last-modified").map(str::to_owned),
            };
            if validators.etag.is_some() || validators.last_modified.is_some() {
                let value = serde_json::to_string(&validators)
                    .map_err(|e| PluginError::Fatal(e.to_string()))?;
                sync::set(&feed_key, &value)?;
            } else {
                sync::remove(&feed_key)?;
            }
        }
        Ok(())
    }

    fn publish(
        &self,
        publisher: &Publisher,
        feed_url: &str,
        feed_title: Option<&str>,
        key: &str,
        item: &Item,
    ) -> Result<(), PluginError> {
        let mut fields = match serde_json::to_value(item) {
            Ok(Json::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        fields.insert("feed".into(), json!(feed_url));
        if let Some(title) = feed_title {
            fields.insert("feed_title".into(), json!(title));
        }
        let id = format!("{}{key}", self.config.id_prefix);
        let doc =
            Document::from_json_with_id(&id, &Json::Object(fields).to_string()).map_err(|e| {
                PluginError::Fatal(format!(
                    "item {key}: {}",
                    weir_plugin::field_error_message(&e)
                ))
            })?;
        publisher
            .publish(doc)
            .map_err(|e| PluginError::Fatal(format!("publish refused: {e}")))
    }

    /// With `delete_missing`: a delete for each item sent before that its
    /// feed (fetched whole this run) no longer lists.
    fn delete_missing(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let feeds: HashSet<&String> = self.config.feeds.iter().collect();
        let gone: Vec<String> = sync::entries()
            .filter(|(key, _)| key.starts_with(ITEM_KEY) && !self.seen.contains(key))
            .filter(|(_, value)| {
                serde_json::from_str::<Sent>(value)
                    .map_or(true, |s| !self.unchanged_feeds.contains(&s.feed))
            })
            .map(|(key, _)| key)
            .collect();
        if !gone.is_empty() {
            weir_plugin::info!("{} items are no longer in their feeds: deleted", gone.len());
        }
        for key in gone {
            let id = &key[ITEM_KEY.len()..];
            sync::delete(publisher, &format!("{}{id}", self.config.id_prefix))?;
            sync::remove(&key)?;
        }
        // Validators of feeds no longer configured.
        let stale: Vec<String> = sync::entries()
            .map(|(key, _)| key)
            .filter(|key| {
                key.strip_prefix(FEED_KEY)
                    .is_some_and(|f| !feeds.contains(&f.to_owned()))
            })
            .collect();
        for key in stale {
            sync::remove(&key)?;
        }
        Ok(())
    }
}

impl Connector for Feeds {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.feeds.is_empty() {
            issues.push(issue("feeds", "give at least one feed URL"));
        }
        for (i, feed) in config.feeds.iter().enumerate() {
            if let Err(e) = Url::parse(feed) {
                issues.push(issue(format!("feeds[{i}]"), e));
            }
        }
        if config.delete_missing && !config.incremental {
            issues.push(issue(
                "delete_missing",
                "needs `incremental = true` (it deletes items sent before)",
            ));
        }
        if config.user_agent.trim().is_empty() || config.user_agent.chars().any(char::is_control) {
            issues.push(issue(
                "user_agent",
                "must be a name, with no control characters",
            ));
        }
        if !(1..=1024).contains(&config.max_feed_mib) {
            issues.push(issue("max_feed_mib", "must be 1 to 1,024"));
        }
        if config.timeout_secs == 0 {
            issues.push(issue("timeout_secs", "must be at least 1"));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self {
            config,
            seen: HashSet::new(),
            unchanged_feeds: HashSet::new(),
        })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        for url in self.config.feeds.clone() {
            self.sync_feed(publisher, &url)?;
        }
        if self.config.incremental && self.config.delete_missing {
            self.delete_missing(publisher)?;
        }
        Ok(())
    }
}

weir_plugin::export_connector!(Feeds);
