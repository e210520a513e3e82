//! Dense vector fields in the core's schema, set up at start: a field that
//! is missing is added through the Schema API with a `DenseVectorField`
//! type of its size and similarity; one that exists must be a dense vector
//! of that size. A schema Solr will not change (a classic `schema.xml`)
//! stops the run at start, saying what to add by hand.

use weir_plugin::http::{Request, Url};
use weir_plugin::{ConfigIssue, PluginError, issue};

use crate::{Solr, solr_message};

/// The largest vector Solr indexes by default (Lucene's limit).
const MAX_DIMENSIONS: usize = 1024;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    field: String,
    dimensions: usize,
    #[serde(default)]
    similarity: Similarity,
}

#[derive(serde::Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum Similarity {
    #[default]
    Cosine,
    DotProduct,
    Euclidean,
}

impl Similarity {
    fn name(self) -> &'static str {
        match self {
            Similarity::Cosine => "cosine",
            Similarity::DotProduct => "dot_product",
            Similarity::Euclidean => "euclidean",
        }
    }
}

pub fn check(vectors: &[Vector]) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        if v.field.is_empty() || v.field.contains(['/', '?', '#', '*']) {
            issues.push(issue(format!("vectors[{i}].field"), "must be a field name"));
        }
        if !(1..=MAX_DIMENSIONS).contains(&v.dimensions) {
            issues.push(issue(
                format!("vectors[{i}].dimensions"),
                format!("must be from 1 to {MAX_DIMENSIONS}"),
            ));
        }
        if vectors[..i].iter().any(|w| w.field == v.field) {
            issues.push(issue(format!("vectors[{i}].field"), "is listed twice"));
        }
    }
    issues
}

/// A document's vector fields checked before Solr sees them (Solr answers
/// a vector of another size with a 500 that fails the whole batch).
pub fn check_document(vectors: &[Vector], json: &str) -> Result<(), String> {
    if vectors.is_empty() {
        return Ok(());
    }
    let doc: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| format!("the host sent JSON that does not parse: {e}"))?;
    for v in vectors {
        let Some(value) = doc.get(&v.field) else {
            continue;
        };
        let numbers = value
            .as_array()
            .filter(|a| a.iter().all(serde_json::Value::is_number));
        match numbers {
            Some(a) if a.len() == v.dimensions => {}
            Some(a) => {
                return Err(format!(
                    "vector field `{}` holds {} numbers, not the {} its field takes",
                    v.field,
                    a.len(),
                    v.dimensions
                ));
            }
            None => {
                return Err(format!(
                    "vector field `{}` is not a list of numbers",
                    v.field
                ));
            }
        }
    }
    Ok(())
}

impl Solr {
    /// GET a schema resource: its JSON, or None when Solr has none (404).
    fn schema_get(&self, core: &Url, what: &str) -> Result<Option<serde_json::Value>, String> {
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

    fn schema_post(&self, core: &Url, command: serde_json::Value) -> Result<(), String> {
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
            let similarity = v.similarity.name();
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
        s = v.similarity.name()
    )
}
