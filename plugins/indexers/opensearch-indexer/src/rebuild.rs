//! `weir run --full --rebuild`: the host sets `_weir_rebuild` to the run's
//! generation G. Documents go to a new index `<index>-weir-<G>`, made at
//! start with the live index's settings and mappings; the sweep marker at
//! the end of the complete full sync swaps alias `<index>` to it in one
//! `_aliases` call (removing the live index when `<index>` was one), then
//! deletes the index the alias named before. The configured `vectors` win
//! over the live mapping: a rebuild is how a vector field's size changes. A rebuild that never gets its
//! marker leaves the live index as it was; its new index is an orphan,
//! removed when the next rebuild starts.

use serde_json::{Map, Value as Json, json};
use weir_plugin::http::Request;
use weir_plugin::sweep::{REBUILD_KEY, Sweep};
use weir_plugin::{ConfigIssue, issue};

use crate::OpenSearch;
use crate::config::Config;
use crate::sweep::{SweepError, stamp_properties};

pub fn check(config: &Config) -> Vec<ConfigIssue> {
    let Some(generation) = &config.rebuild else {
        return Vec::new();
    };
    let mut issues = Vec::new();
    if generation.is_empty() || !generation.bytes().all(|b| b.is_ascii_digit()) {
        issues.push(issue(
            REBUILD_KEY,
            "must be a run's generation, a whole number (set by `weir run --full --rebuild`, not by hand)",
        ));
    }
    if config.index.is_none() || config.index_field.is_some() {
        issues.push(issue(
            "index",
            "a rebuild (`--rebuild`) needs `index` and no `index_field`: it rebuilds one index behind an alias of that name",
        ));
    }
    issues
}

/// The index a rebuild writes into.
pub fn new_index(config: &Config) -> Option<String> {
    Some(format!(
        "{}-weir-{}",
        config.index.as_deref()?,
        config.rebuild.as_deref()?
    ))
}

/// Settings a new index cannot be created with (the cluster sets them).
const OWN_SETTINGS: [&str; 9] = [
    "index.uuid",
    "index.creation_date",
    "index.provided_name",
    "index.version.",
    "index.routing.allocation.initial_recovery",
    "index.resize.",
    "index.blocks.",
    "index.verified_before_close",
    "index.history.uuid",
];

fn settings_to_copy(settings: &Json) -> Map<String, Json> {
    settings
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| !OWN_SETTINGS.iter().any(|own| key.starts_with(own)))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

fn ok(status: u16) -> bool {
    (200..300).contains(&status)
}

impl OpenSearch {
    fn rebuilding(&self) -> Option<(&str, &str)> {
        self.config.rebuild.as_ref()?;
        Some((
            self.config.index.as_deref()?,
            self.default_index.as_deref()?,
        ))
    }

    /// The concrete index `live` names now, with its settings (flat) and
    /// mappings, or none when there is no such index or alias.
    fn live_index(&self, live: &str) -> Result<Option<(String, Json)>, String> {
        let (status, found) = self.call(Request::get(
            &self.root.join(&format!("{live}?flat_settings=true")),
        ))?;
        match status {
            404 => Ok(None),
            200 => {
                let indices = found.as_object().cloned().unwrap_or_default();
                if indices.len() != 1 {
                    return Err(format!(
                        "`{live}` names {} indices: a rebuild swaps an alias that names one index",
                        indices.len()
                    ));
                }
                Ok(indices.into_iter().next())
            }
            status => Err(format!(
                "cannot read index `{live}` (status {status}): {}",
                found.pointer("/error/reason").unwrap_or(&found)
            )),
        }
    }

    /// At start: orphans of interrupted rebuilds removed, the new index made
    /// like the live one.
    pub fn prepare_rebuild(&self) -> Result<(), String> {
        let Some((live, new)) = self.rebuilding() else {
            return Ok(());
        };
        let current = self.live_index(live)?;
        let current_name = current.as_ref().map(|(name, _)| name.as_str());
        let listing =
            format!("_cat/indices/{live}-weir-*?format=json&h=index&expand_wildcards=all");
        if let (200, Json::Array(rows)) = self.call(Request::get(&self.root.join(&listing)))? {
            for name in rows.iter().filter_map(|row| row["index"].as_str()) {
                if name == new || Some(name) == current_name {
                    continue;
                }
                let (status, _) = self.call(Request::new("DELETE", &self.root.join(name)))?;
                if ok(status) {
                    weir_plugin::warn!(
                        "removed index `{name}`, left by a rebuild of `{live}` that did not finish"
                    );
                }
            }
        }
        let mut mappings = current
            .as_ref()
            .and_then(|(_, index)| index.get("mappings"))
            .cloned()
            .filter(Json::is_object)
            .unwrap_or_else(|| json!({}));
        let properties = mappings
            .as_object_mut()
            .expect("an object")
            .entry("properties")
            .or_insert_with(|| json!({}));
        if let (Some(properties), Json::Object(stamps)) =
            (properties.as_object_mut(), stamp_properties())
        {
            for (field, mapping) in stamps {
                properties.entry(field).or_insert(mapping);
            }
            // The configured vector fields win: a rebuild is how their size
            // or similarity changes.
            for v in &self.config.vectors {
                properties.insert(v.field.clone(), crate::vectors::mapping(v));
            }
        }
        let mut settings = current
            .as_ref()
            .map(|(_, index)| settings_to_copy(&index["settings"]))
            .unwrap_or_default();
        if !self.config.vectors.is_empty() {
            settings.insert("index.knn".to_owned(), json!(true));
        }
        let body = json!({ "settings": settings, "mappings": mappings });
        let (status, answer) = self.put(new, &body)?;
        let made = ok(status)
            || answer.pointer("/error/type") == Some(&json!("resource_already_exists_exception"));
        if !made {
            return Err(format!(
                "cannot make index `{new}` for the rebuild of `{live}` (status {status}): {}",
                answer.pointer("/error/reason").unwrap_or(&answer)
            ));
        }
        weir_plugin::info!(
            "rebuilding `{live}` into `{new}`{}: `{live}` is left as it is until the full sync is complete",
            current_name
                .map(|name| format!(" (made like `{name}`)"))
                .unwrap_or_default()
        );
        Ok(())
    }

    /// The sweep marker of a rebuild: alias `live` swapped to the new index
    /// in one call, the index it named before deleted.
    pub fn swap(&mut self, sweep: &Sweep) -> Result<(), SweepError> {
        let Some((live, new)) = self.rebuilding() else {
            return Ok(());
        };
        let (live, new) = (live.to_owned(), new.to_owned());
        self.refresh(&new)?;
        let current = self.live_index(&live)?;
        let rebuilt = self.count(&new, json!({ "match_all": {} }))?;
        let before = match &current {
            Some((name, _)) if *name != new => self.count(name, json!({ "match_all": {} }))?,
            _ => 0,
        };
        sweep.allows(before.saturating_sub(rebuilt), before)?;
        let mut actions = Vec::new();
        let mut old = None;
        match &current {
            Some((name, _)) if *name == new => {}
            Some((name, _)) if *name == live => {
                actions.push(json!({ "remove_index": { "index": live } }));
            }
            Some((name, _)) => {
                actions.push(json!({ "remove": { "index": name, "alias": live } }));
                old = Some(name.clone());
            }
            None => {}
        }
        actions.push(json!({ "add": { "index": new, "alias": live } }));
        self.post_json("_aliases", &json!({ "actions": actions }))?;
        if let Some(old) = &old {
            let (status, answer) = self
                .call(Request::new("DELETE", &self.root.join(old)))
                .map_err(|e| SweepError::ForNow(e, None))?;
            if !ok(status) {
                weir_plugin::warn!(
                    "`{live}` now names `{new}`, but the index it named before, `{old}`, could not be deleted (status {status}): {answer}"
                );
            }
        }
        weir_plugin::info!(
            "rebuilt `{live}`: it now names `{new}` ({rebuilt} documents, {before} before){}",
            old.map(|old| format!("; `{old}` deleted"))
                .unwrap_or_default()
        );
        Ok(())
    }
}
