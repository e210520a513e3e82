//! Which sync a submitted config's connectors keep state for: its
//! `[state] id` when it names one (two configs share state only when they
//! name the same id), else [`default_sync_id`], so that two configs of one
//! tenant never read or write each other's state by accident.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::run::sync::{canonical, source_fingerprint};

/// The sync of a submitted config that names none: `cfg-` and 16 hex
/// digits of SHA-256 over what says where its documents come from and go
/// to: each connector's pipeline, name and source settings (its plugin's
/// config and grants, as a change of source is told), and each of their
/// pipelines' indexer (its plugin's file name, config and folders).
/// Submitting the same config again, or one whose stages or limits
/// changed, resumes its state; a config that reads another source or
/// writes elsewhere is another sync. (Name it with `[state] id` to keep
/// one sync across such changes: a changed source is then told and its
/// full sync cleans up.)
pub(crate) fn default_sync_id(config: &Config) -> String {
    let mut connectors: Vec<Value> = config
        .connectors
        .iter()
        .map(|c| {
            Value::from(format!(
                "{}/{}={}",
                c.pipeline,
                c.name,
                source_fingerprint(c)
            ))
        })
        .collect();
    connectors.sort_by_key(ToString::to_string);
    let mut pipelines: Vec<&str> = config
        .connectors
        .iter()
        .map(|c| c.pipeline.as_str())
        .collect();
    pipelines.sort_unstable();
    pipelines.dedup();
    let indexers: Vec<Value> = pipelines
        .into_iter()
        .map(|pipeline| match config.indexer_for(pipeline) {
            Some((_, indexer)) => {
                let plugin = &indexer.plugin;
                let file = plugin
                    .path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned());
                let dirs: Vec<String> = plugin
                    .grants
                    .dirs
                    .iter()
                    .map(|d| format!("{}={}", d.host.display(), d.guest))
                    .collect();
                serde_json::json!({
                    "pipeline": pipeline,
                    "file": file,
                    "config": canonical(&plugin.config),
                    "dirs": dirs,
                })
            }
            None => serde_json::json!({ "pipeline": pipeline }),
        })
        .collect();
    let settings = serde_json::json!({ "connectors": connectors, "indexers": indexers });
    let digest = Sha256::digest(settings.to_string());
    format!("cfg-{}", hex::encode(&digest[..8]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, std::path::Path::new("/plugins"), std::iter::empty()).expect("a config")
    }

    const ONE: &str = r#"
        [[connectors]]
        name = "files"
        pipeline = "books"
        plugin = { path = "file_connector.wasm", config = { paths = ["/d/a.jsonl"], incremental = true } }
        [[pipelines]]
        name = "books"
        stages = []
        [indexer]
        plugin = { path = "jsonl_indexer.wasm", config = { path = "/out/a.jsonl" } }
    "#;
    #[test]
    fn a_config_without_an_id_is_its_sources_and_destinations() {
        let id = default_sync_id(&config(ONE));
        assert!(id.starts_with("cfg-") && id.len() == 20, "{id}");
        assert!(
            crate::config::state::state_id_problem(&id).is_none(),
            "{id}"
        );
        // Stages, threads, limits: the same sync.
        let more = ONE.replace(
            "stages = []",
            r#"stages = [{ name = "t", plugin = { path = "trim.wasm" } }]"#,
        ) + "\n[worker]\nthreads = 3\n";
        assert_eq!(default_sync_id(&config(&more)), id);
        // Another source, another destination, another name: another sync.
        for other in [
            ONE.replace("/d/a.jsonl", "/d/b.jsonl"),
            ONE.replace("/out/a.jsonl", "/out/b.jsonl"),
            ONE.replace("name = \"files\"", "name = \"other\""),
        ] {
            assert_ne!(default_sync_id(&config(&other)), id, "{other}");
        }
    }
}
