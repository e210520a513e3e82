//! `knn_vector` fields set up at start, with the k-NN plugin's Lucene
//! engine (HNSW; no native library): a missing index is created with
//! `index.knn` and the fields; a field missing from an index that exists is
//! added to its mapping; one that exists must be a `knn_vector` of that
//! size. What the cluster refuses (no k-NN plugin, an index made without
//! `index.knn`) stops the run at start with its answer.

use serde_json::{Value as Json, json};
use weir_plugin::http::Request;
use weir_plugin::search::{Similarity, VectorField};

use crate::{OpenSearch, excerpt};

/// The largest vector the k-NN plugin's Lucene engine takes.
pub const MAX_DIMENSIONS: usize = 16_000;

fn space_type(similarity: Similarity) -> &'static str {
    match similarity {
        Similarity::Cosine => "cosinesimil",
        Similarity::DotProduct => "innerproduct",
        Similarity::Euclidean => "l2",
    }
}

/// The mapping of one vector field.
pub(crate) fn mapping(v: &VectorField) -> Json {
    json!({
        "type": "knn_vector",
        "dimension": v.dimensions,
        "method": { "name": "hnsw", "engine": "lucene", "space_type": space_type(v.similarity) },
    })
}

impl OpenSearch {
    pub(crate) fn call(&self, request: Request) -> Result<(u16, Json), String> {
        let response = self
            .request(request)
            .send()
            .map_err(|e| format!("cannot reach the cluster: {e}"))?;
        let body = serde_json::from_slice(&response.body)
            .unwrap_or_else(|_| json!(excerpt(&response.body)));
        Ok((response.status, body))
    }

    pub(crate) fn put(&self, path: &str, body: &Json) -> Result<(u16, Json), String> {
        self.call(
            Request::new("PUT", &self.root.join(path))
                .header("content-type", "application/json")
                .body(body.to_string()),
        )
    }

    /// Make sure `index` has each configured vector field.
    pub fn set_up_vectors(&self) -> Result<(), String> {
        let vectors = &self.config.vectors;
        let Some(index) = self
            .default_index
            .as_deref()
            .filter(|_| !vectors.is_empty())
        else {
            return Ok(());
        };
        let (status, found) =
            self.call(Request::get(&self.root.join(&format!("{index}/_mapping"))))?;
        let refused = |what: &str, status: u16, answer: &Json| {
            let reason = answer
                .pointer("/error/reason")
                .cloned()
                .unwrap_or_else(|| answer.clone());
            format!("cannot {what} in index `{index}` (status {status}): {reason}")
        };
        if status == 404 {
            let properties: serde_json::Map<String, Json> = vectors
                .iter()
                .map(|v| (v.field.clone(), mapping(v)))
                .collect();
            let body = json!({ "settings": { "index.knn": true }, "mappings": { "properties": properties } });
            let (status, answer) = self.put(index, &body)?;
            // Another indexer may have made it meanwhile: then check it.
            if (200..300).contains(&status) {
                return Ok(());
            }
            if answer.pointer("/error/type") != Some(&json!("resource_already_exists_exception")) {
                return Err(refused(
                    "set up the vector fields (is the k-NN plugin installed?)",
                    status,
                    &answer,
                ));
            }
            return self.set_up_vectors();
        }
        if !(200..300).contains(&status) {
            return Err(refused("read the mapping", status, &found));
        }
        // The answer is keyed by the concrete index (an alias names another).
        let properties = found
            .as_object()
            .and_then(|m| m.values().next())
            .and_then(|m| m.pointer("/mappings/properties"))
            .cloned()
            .unwrap_or_default();
        for v in vectors {
            match properties.get(&v.field) {
                None => {
                    let body = json!({ "properties": { v.field.clone(): mapping(v) } });
                    let (status, answer) = self.put(&format!("{index}/_mapping"), &body)?;
                    if !(200..300).contains(&status) {
                        return Err(refused(
                            &format!("add the vector field `{}`", v.field),
                            status,
                            &answer,
                        ));
                    }
                }
                Some(field) => {
                    let kind = field["type"].as_str().unwrap_or("object");
                    let size = field["dimension"].as_u64();
                    if kind != "knn_vector" || size != Some(v.dimensions as u64) {
                        return Err(format!(
                            "field `{}` of index `{index}` is a `{kind}`{}, not a knn_vector of {} dimensions: use another field or index",
                            v.field,
                            size.map(|s| format!(" of {s} dimensions"))
                                .unwrap_or_default(),
                            v.dimensions
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
