//! Dense vector fields in the core's schema, set up at start: a field that
//! is missing is added through the Schema API with a `DenseVectorField`
//! type of its size and similarity; one that exists must be a dense vector
//! of that size. A schema Solr will not change (a classic `schema.xml`)
//! stops the run at start, saying what to add by hand.

use weir_plugin::PluginError;
use weir_plugin::http::{Request, Url};
use weir_plugin::search::{Similarity, VectorField as Vector};

use crate::{Solr, solr_message};

/// The largest vector Solr indexes by default (Lucene's limit).
pub const MAX_DIMENSIONS: usize = 1024;

fn similarity_name(similarity: Similarity) -> &'static str {
    match similarity {
        Similarity::Cosine => "cosine",
        Similarity::DotProduct => "dot_product",
        Similarity::Euclidean => "euclidean",
    }
}

impl Solr {
    /// GET a schema resource: its JSON, or None when Solr has none (404).
    pub(crate) fn schema_get(
        &self,
        core: &Url,
        what: &str,
    ) -> Result<Option<serde_json::Value>, String> {
        let url = core.join(&format!("schema/{what}?wt=json"));
        let response = self
            .request(Request::get(&url))
            .send()
            .map_err(|e| format!("cannot read the schema ({url}): {e}"))?;
        match response.status {
            200..=299 => serde_json::from_slice(&response.body)
                .map(Some)
                .map_err(|e| format!("{url} answered what is not JSON: {e}")),
            404 => Ok(None),
            status => Err(format!(
                "{url} answered status {status}: {}",
                solr_message(&response)
            )),
        }
    }

    pub(crate) fn schema_post(&self, core: &Url, command: serde_json::Value) -> Result<(), String> {
        let url = core.join("schema?wt=json");
        let response = self
            .request(
                Request::post(&url)
                    .header("content-type", "application/json")
                    .body(command.to_string()),
            )
            .send()
            .map_err(|e| format!("cannot change the schema ({url}): {e}"))?;
        if response.ok() {
            return Ok(());
        }
        let said = solr_message(&response);
        let details: Option<serde_json::Value> = serde_json::from_slice(&response.body).ok();
        let more = details
            .as_ref()
            .and_then(|d| d.pointer("/error/details"))
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        Err(format!(
            "Solr refused to change the schema (status {}): {said}{more}",
            response.status
        ))
    }

    /// Make sure each configured vector field exists with its size.
    pub fn set_up_vectors(&self, core: &Url) -> Result<(), PluginError> {
        self.vector_fields(core).map_err(PluginError::Fatal)
    }

    fn vector_fields(&self, core: &Url) -> Result<(), String> {
        for v in &self.config.vectors {
            let similarity = similarity_name(v.similarity);
            let field = match self.schema_get(core, &format!("fields/{}", v.field))? {
                Some(found) => found["field"].clone(),
                None => {
                    let type_name = format!("weir_vector_{}_{similarity}", v.dimensions);
                    if self
                        .schema_get(core, &format!("fieldtypes/{type_name}"))?
                        .is_none()
                    {
                        self.schema_post(
                            core,
                            serde_json::json!({ "add-field-type": {
                                "name": type_name,
                                "class": "solr.DenseVectorField",
                                "vectorDimension": v.dimensions,
                                "similarityFunction": similarity,
                            }}),
                        )
                        .map_err(|e| by_hand(v, e))?;
                    }
                    self.schema_post(
                        core,
                        serde_json::json!({ "add-field": {
                            "name": v.field, "type": type_name, "indexed": true, "stored": true,
                        }}),
                    )
                    .map_err(|e| by_hand(v, e))?;
                    continue;
                }
            };
            let type_name = field["type"].as_str().unwrap_or_default();
            let found = self
                .schema_get(core, &format!("fieldtypes/{type_name}"))?
                .map(|t| t["fieldType"].clone())
                .unwrap_or_default();
            let class = found["class"].as_str().unwrap_or_default();
            let size = found["vectorDimension"]
                .as_u64()
                .or_else(|| found["vectorDimension"].as_str()?.parse().ok());
            if !class.ends_with("DenseVectorField") || size != Some(v.dimensions as u64) {
                return Err(format!(
                    "field `{}` of core `{}` is of type `{type_name}` ({class}, vectorDimension {}), not a DenseVectorField of {} dimensions: use another field or fix the schema",
                    v.field,
                    self.config.collection,
                    size.map_or("none".into(), |s| s.to_string()),
                    v.dimensions
                ));
            }
        }
        Ok(())
    }
}

/// The error of a refused schema change, with what to add by hand.
fn by_hand(v: &Vector, error: String) -> String {
    format!(
        "cannot add the vector field `{}`: {error}. A schema Solr cannot change needs it written in: <fieldType name=\"weir_vector_{d}_{s}\" class=\"solr.DenseVectorField\" vectorDimension=\"{d}\" similarityFunction=\"{s}\"/> and <field name=\"{}\" type=\"weir_vector_{d}_{s}\" indexed=\"true\" stored=\"true\"/>",
        v.field,
        v.field,
        d = v.dimensions,
        s = similarity_name(v.similarity)
    )
}
