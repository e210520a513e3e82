//! test-connector: publishes what its config says and fails where told,
//! to test the run lifecycle.
//!
//! Config: `docs` (JSON objects with an `id`, published first), `count`
//! (then that many `doc-<n>` documents with a `n` field; with `ops`, three
//! times each as create, update, delete), and failure
//! switches: `fail_pre_execute`, `fail_execute_after` (publish that many,
//! then fail), `fail_post_execute`, `fail_close`, `hang` (after publishing,
//! spin until interrupted), `sleep_ms` (after publishing, sleep that long
//! in the host: WASI), `check_sleep_ms` (sleep in `check-config`),
//! `state_keys` (first keep that many 8-byte keys, `k0000000` on, with
//! empty values in its state; a refusal fails it with the host's reason),
//! `sync_keys` and `delete_kept` (a sync that alternates: with an empty
//! state, keep `sync_keys` keys `s0000000` on and publish a document for
//! each; else delete the documents of the first `delete_kept` kept keys
//! and remove those keys, logging `deleted <n> kept keys`), both before
//! `sleep_ms`; `forever` (then, until the run is stopped, publish
//! `doc-<n>` from the number its state's `cursor` key holds on, setting
//! `cursor` to the next number after each, at most `rate` a second).
//! `packed` (first of all: `publish-packed` calls made as given, each
//! `{ "text", "lengths" }`, even when they are not well formed; a refusal
//! fails it with `packed call <i> refused document <at>: <reason>`).

use weir_plugin::serde_json::{Map, Value as Json};
use weir_plugin::{Connector, Document, PluginError, Publisher};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    docs: Vec<Map<String, Json>>,
    #[serde(default)]
    count: u64,
    /// Publish every synthetic document three times, as `op` create, update
    /// and delete (`version` 1, 2, 3), in rounds: all creates, then all
    /// updates, then all deletes.
    #[serde(default)]
    ops: bool,
    /// Give every synthetic document a `body` of this many characters.
    #[serde(default)]
    pad: usize,
    #[serde(default)]
    fail_pre_execute: bool,
    fail_execute_after: Option<u64>,
    #[serde(default)]
    fail_post_execute: bool,
    #[serde(default)]
    fail_close: bool,
    #[serde(default)]
    hang: bool,
    #[serde(default)]
    sleep_ms: u64,
    #[serde(default)]
    check_sleep_ms: u64,
    #[serde(default)]
    state_keys: u64,
    #[serde(default)]
    sync_keys: u64,
    #[serde(default)]
    delete_kept: u64,
    #[serde(default)]
    forever: bool,
    rate: Option<f64>,
    #[serde(default)]
    packed: Vec<Packed>,
}

/// One `publish-packed` call, as the config gives it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Packed {
    text: String,
    lengths: Vec<u32>,
}

/// `packed`: each call as given, straight through the contract.
fn publish_packed(calls: &[Packed], publisher: &Publisher) -> Result<(), PluginError> {
    use weir_plugin::bindings::connector::weir::plugin::publishing_packed as packed;
    for (i, call) in calls.iter().enumerate() {
        let docs = packed::PackedDocuments {
            text: call.text.clone(),
            lengths: call.lengths.clone(),
        };
        if let Err(refusal) = packed::publish_packed(publisher, &docs) {
            let reason = match refusal.reason {
                packed::PackedReason::Invalid(e) => weir_plugin::field_error_message(&e),
                packed::PackedReason::Refused(why) => format!("refused: {why}"),
            };
            return Err(PluginError::Fatal(format!(
                "packed call {i} refused document {}: {reason}",
                refusal.at
            )));
        }
    }
    Ok(())
}

struct TestConnector(Config);

fn publish(publisher: &Publisher, json: String) -> Result<(), PluginError> {
    let doc = Document::from_json(&json)
        .map_err(|e| PluginError::Fatal(weir_plugin::field_error_message(&e)))?;
    publisher.publish(doc).map_err(PluginError::Fatal)
}

/// `sync_keys` and `delete_kept`: keep and publish keys on an empty state,
/// else delete some of those kept.
fn sync_keys(c: &Config, publisher: &Publisher) -> Result<(), PluginError> {
    use weir_plugin::sync;
    if sync::size().0 == 0 {
        for n in 0..c.sync_keys {
            let key = format!("s{n:07}");
            publish(publisher, format!(r#"{{"id":"{key}","n":{n}}}"#))?;
            sync::set(&key, "")?;
        }
        return Ok(());
    }
    let kept: Vec<String> = sync::entries()
        .map(|(key, _)| key)
        .take(c.delete_kept as usize)
        .collect();
    for key in &kept {
        sync::delete(publisher, key)?;
        sync::remove(key)?;
    }
    weir_plugin::info!("deleted {} kept keys", kept.len());
    Ok(())
}

/// `forever`: publish `doc-<n>` from the state's `cursor` on, until the
/// run is stopped; each document's number + 1 is the cursor once it is done.
fn forever(rate: Option<f64>, publisher: &Publisher) -> Result<(), PluginError> {
    use weir_plugin::sync;
    let from: u64 = sync::get("cursor")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let began = std::time::Instant::now();
    for (sent, n) in (from..).enumerate() {
        if let Some(rate) = rate {
            let due = std::time::Duration::from_secs_f64(sent as f64 / rate);
            if let Some(wait) = due.checked_sub(began.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        publish(publisher, format!(r#"{{"id":"doc-{n}","n":{n}}}"#))?;
        sync::set("cursor", &(n + 1).to_string())?;
    }
    Ok(())
}

impl Connector for TestConnector {
    type Config = Config;

    fn check(config: &Config) -> Vec<weir_plugin::ConfigIssue> {
        std::thread::sleep(std::time::Duration::from_millis(config.check_sleep_ms));
        Vec::new()
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        if config.fail_pre_execute {
            return Err(PluginError::Fatal(
                "configured to fail in pre-execute".into(),
            ));
        }
        Ok(Self(config))
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let c = &self.0;
        publish_packed(&c.packed, publisher)?;
        for n in 0..c.state_keys {
            weir_plugin::sync::set(&format!("k{n:07}"), "")?;
        }
        let explicit = c.docs.iter().map(|d| Json::Object(d.clone()).to_string());
        let rounds: &[(&str, u32)] = if c.ops {
            &[("create", 1), ("update", 2), ("delete", 3)]
        } else {
            &[("", 0)]
        };
        let body = "x".repeat(c.pad);
        let body = &body;
        let synthetic = rounds.iter().flat_map(move |&(op, version)| {
            (0..c.count).map(move |n| match op {
                "" if body.is_empty() => format!(r#"{{"id":"doc-{n}","n":{n}}}"#),
                "" => format!(r#"{{"id":"doc-{n}","n":{n},"body":"{body}"}}"#),
                op => format!(r#"{{"id":"doc-{n}","n":{n},"op":"{op}","version":{version}}}"#),
            })
        });
        for (published, json) in explicit.chain(synthetic).enumerate() {
            if c.fail_execute_after == Some(published as u64) {
                return Err(PluginError::Fatal(format!(
                    "configured to fail after {published} documents"
                )));
            }
            publish(publisher, json)?;
        }
        if c.sync_keys > 0 || c.delete_kept > 0 {
            sync_keys(c, publisher)?;
        }
        if c.forever {
            forever(c.rate, publisher)?;
        }
        if c.hang {
            loop {
                std::hint::black_box(());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(c.sleep_ms));
        Ok(())
    }

    fn post_execute(&mut self) -> Result<(), PluginError> {
        if self.0.fail_post_execute {
            return Err(PluginError::Fatal(
                "configured to fail in post-execute".into(),
            ));
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), PluginError> {
        if self.0.fail_close {
            return Err(PluginError::Fatal("configured to fail in close".into()));
        }
        Ok(())
    }
}

weir_plugin::export_connector!(TestConnector);
