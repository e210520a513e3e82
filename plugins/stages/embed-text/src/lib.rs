//! embed-text: turn a text field into a vector with an embedding service.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::collections::HashMap;

use config::{Api, Config};
use serde_json::{Value as Json, json};
use weir_plugin::http::{HttpError, Request, Url};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
};

struct EmbedText {
    config: Config,
    endpoint: Url,
    key: Option<String>,
}

impl BatchStage for EmbedText {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if let Err(e) = Url::parse_base(&config.url) {
            issues.push(issue("url", e));
        }
        if config.api != Api::Tei && config.model.is_none() {
            issues.push(issue(
                "model",
                "names the model (the `openai` and `ollama` APIs need one)",
            ));
        }
        if config.max_inputs == 0 || config.max_inputs > 4096 {
            issues.push(issue("max_inputs", "must be 1 to 4096"));
        }
        if config.max_chars == 0 {
            issues.push(issue("max_chars", "must be at least 1"));
        }
        if config.dimensions == Some(0) || config.dimensions.is_some_and(|d| d > 65_536) {
            issues.push(issue("dimensions", "must be 1 to 65536"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let base = Url::parse_base(&config.url)?;
        let endpoint = base.join(match config.api {
            Api::Openai => "v1/embeddings",
            Api::Ollama => "api/embed",
            Api::Tei => "embed",
        });
        let key = match &config.api_key_env {
            Some(name) => Some(std::env::var(name).map_err(|_| {
                format!("the environment variable `{name}` (api_key_env) is not set: grant it with grants.env")
            })?),
            None => None,
        };
        Ok(Self {
            config,
            endpoint,
            key,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        let c = &self.config;
        let names = [c.source.clone()];
        let texts: Vec<Option<String>> =
            weir_plugin::get_json_each(&docs.iter().collect::<Vec<_>>(), &names)
                .into_iter()
                .map(|answers| {
                    let json = answers.into_iter().next().flatten()?;
                    let text = match serde_json::from_str::<Json>(&json).ok()? {
                        Json::String(s) => s,
                        Json::Array(items) => items
                            .iter()
                            .filter_map(Json::as_str)
                            .collect::<Vec<_>>()
                            .join("\n"),
                        _ => return None,
                    };
                    Some(text.chars().take(c.max_chars).collect())
                })
                .collect();
        let wanted: Vec<usize> = (0..docs.len())
            .filter(|&i| texts[i].as_deref().is_some_and(|t| !t.trim().is_empty()))
            .collect();
        let mut outcomes: Vec<Outcome> = docs.iter().map(|_| Outcome::done()).collect();
        // Each distinct text once: its cache key, and the documents it is for.
        let mut unique: Vec<(String, &str, Vec<usize>)> = Vec::new();
        let mut by_key: HashMap<String, usize> = HashMap::new();
        for &i in &wanted {
            let text = texts[i].as_deref().unwrap_or_default();
            let key = self.key(text);
            match by_key.get(&key) {
                Some(&u) => unique[u].2.push(i),
                None => {
                    by_key.insert(key.clone(), unique.len());
                    unique.push((key, text, vec![i]));
                }
            }
        }
        // What the cache holds is written as the service's answer would be.
        let mut missing: Vec<usize> = Vec::new();
        let found = if c.cache {
            let keys: Vec<String> = unique.iter().map(|(k, _, _)| k.clone()).collect();
            weir_plugin::cache::get(&keys)
        } else {
            Vec::new()
        };
        for (u, (_, _, at)) in unique.iter().enumerate() {
            let kept = found
                .get(u)
                .cloned()
                .flatten()
                .and_then(|bytes| serde_json::from_slice::<Json>(&bytes).ok())
                .filter(|vector| self.check(vector).is_ok());
            match kept {
                Some(vector) => {
                    for &i in at {
                        outcomes[i] = self.write(&docs[i], &vector).into();
                    }
                }
                None => missing.push(u),
            }
        }
        for chunk in missing.chunks(c.max_inputs) {
            let inputs: Vec<&str> = chunk.iter().map(|&u| unique[u].1).collect();
            let vectors = self.embed(&inputs)?;
            if vectors.len() != inputs.len() {
                return Err(PluginError::Document(format!(
                    "{} answered {} vectors for {} inputs",
                    self.endpoint,
                    vectors.len(),
                    inputs.len()
                )));
            }
            let mut keep: Vec<(&str, Vec<u8>)> = Vec::new();
            for (&u, vector) in chunk.iter().zip(vectors) {
                let (key, _, at) = &unique[u];
                let checked = self.check(&vector);
                if checked.is_ok() && c.cache {
                    keep.push((key.as_str(), vector.to_string().into_bytes()));
                }
                for &i in at {
                    outcomes[i] = match &checked {
                        Ok(()) => self.write(&docs[i], &vector).into(),
                        Err(e) => Err::<(), _>(e.clone()).into(),
                    };
                }
            }
            if !keep.is_empty() {
                let entries: Vec<(&str, &[u8])> =
                    keep.iter().map(|(k, v)| (*k, v.as_slice())).collect();
                weir_plugin::cache::put(&entries);
            }
        }
        Ok(outcomes)
    }
}

impl EmbedText {
    /// One request: the vectors of `inputs`, in order.
    fn embed(&self, inputs: &[&str]) -> Result<Vec<Json>, PluginError> {
        let c = &self.config;
        let body = match c.api {
            Api::Openai | Api::Ollama => json!({ "model": c.model, "input": inputs }),
            Api::Tei => json!({ "inputs": inputs, "truncate": true }),
        };
        let mut request = Request::post(&self.endpoint)
            .header("content-type", "application/json")
            .body(body.to_string())
            .timeout(c.timeout)
            .max_body(256 << 20);
        if let Some(key) = &self.key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let response = request.send().map_err(|e| match e {
            HttpError::Unreachable(m) => PluginError::Transient(m),
            HttpError::Failed(m) => PluginError::Document(m),
        })?;
        let said = || {
            let text = response.text();
            text.chars().take(300).collect::<String>()
        };
        if response.status == 429 || response.status >= 500 {
            return Err(PluginError::Transient(format!(
                "{} answered {}: {}",
                self.endpoint,
                response.status,
                said()
            )));
        }
        if !response.ok() {
            return Err(PluginError::Document(format!(
                "{} answered {}: {}",
                self.endpoint,
                response.status,
                said()
            )));
        }
        let answer: Json = serde_json::from_slice(&response.body).map_err(|e| {
            PluginError::Document(format!("{} answered with no JSON: {e}", self.endpoint))
        })?;
        let vectors = match (c.api, answer) {
            (Api::Openai, Json::Object(mut o)) => match o.remove("data") {
                Some(Json::Array(items)) => {
                    let mut items: Vec<(u64, Json)> = items
                        .into_iter()
                        .enumerate()
                        .map(|(n, mut item)| {
                            let index =
                                item.get("index").and_then(Json::as_u64).unwrap_or(n as u64);
                            (
                                index,
                                item.get_mut("embedding")
                                    .map(Json::take)
                                    .unwrap_or_default(),
                            )
                        })
                        .collect();
                    items.sort_by_key(|(i, _)| *i);
                    Some(items.into_iter().map(|(_, v)| v).collect())
                }
                _ => None,
            },
            (Api::Ollama, Json::Object(mut o)) => match o.remove("embeddings") {
                Some(Json::Array(vectors)) => Some(vectors),
                _ => None,
            },
            (Api::Tei, Json::Array(vectors)) => Some(vectors),
            _ => None,
        };
        vectors.ok_or_else(|| {
            PluginError::Document(format!(
                "{} answered in a shape the `{}` API does not have",
                self.endpoint,
                match c.api {
                    Api::Openai => "openai",
                    Api::Ollama => "ollama",
                    Api::Tei => "tei",
                }
            ))
        })
    }

    /// The cache key of `text`: everything that decides its vector.
    fn key(&self, text: &str) -> String {
        let c = &self.config;
        let dimensions = c.dimensions.map(|d| d.to_string()).unwrap_or_default();
        let endpoint = self.endpoint.to_string();
        weir_plugin::cache::key(&[
            b"embed-text/1",
            c.model.as_deref().unwrap_or_default().as_bytes(),
            endpoint.as_bytes(),
            dimensions.as_bytes(),
            text.as_bytes(),
        ])
    }

    /// Whether `vector` is one: a list of finite numbers, of `dimensions`
    /// numbers when that is set.
    fn check(&self, vector: &Json) -> Result<(), PluginError> {
        let Json::Array(numbers) = vector else {
            return Err(PluginError::Document(
                "the service answered a vector that is not a list".into(),
            ));
        };
        if !numbers
            .iter()
            .all(|n| n.as_f64().is_some_and(f64::is_finite))
        {
            return Err(PluginError::Document(
                "the service answered a vector with a value that is not a finite number".into(),
            ));
        }
        if let Some(d) = self.config.dimensions
            && numbers.len() != d
        {
            return Err(PluginError::Document(format!(
                "the service answered a vector of {} dimensions, not the {d} of `dimensions` (another model?)",
                numbers.len()
            )));
        }
        Ok(())
    }

    /// Write `vector`, checked, to the target.
    fn write(&self, doc: &Document, vector: &Json) -> Result<(), PluginError> {
        doc.update(&[FieldChange::set_json(
            self.config.target.as_str(),
            vector.to_string(),
        )])
        .map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(EmbedText);
