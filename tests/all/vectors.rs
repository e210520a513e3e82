//! Vectors end to end on the real servers (Solr, and OpenSearch with the
//! k-NN plugin): texts embedded by the real model
//! (`tests/embedder/`) through embed-text, indexed as dense vectors by the
//! search indexers, which set up the vector fields themselves, and found
//! again by a kNN query with the vector of a question.

use serde_json::{Value, json};
use weir_tests::{embedder_url, http_grants, http_json, solr_url};

use crate::search::{assert_success, docs, failures, run_with, solr_core_of, solr_indexer};

/// The texts indexed: two about water held back, two about other things.
const TEXTS: &str = r#"[
    { id = "weir", text = "a weir across the river holds back the water" },
    { id = "dam", text = "a small dam was built on the stream" },
    { id = "tax", text = "file your income tax forms before april" },
    { id = "pie", text = "bake the apple pie for forty minutes" },
]"#;

/// The embed-text stage writing `vector` from `text`.
pub(crate) fn embed_stage() -> String {
    let url = embedder_url();
    format!(
        r#"[{{ name = "embed", plugin = {{ path = @embed-text, config = {{ url = "{url}", model = "wordllama", source = "text", dimensions = 256 }}, grants = {{ http = {} }} }} }}]"#,
        http_grants(url)
    )
}

/// The model's vector for `text`, asked of the server directly.
pub(crate) fn embedding(text: &str) -> Vec<f64> {
    let body = json!({ "model": "m", "input": [text] }).to_string();
    let (status, answer) = http_json(
        "POST",
        &format!("{}/v1/embeddings", embedder_url()),
        Some(&body),
    );
    assert_eq!(status, 200, "{answer}");
    answer["data"][0]["embedding"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// Every character but letters and digits, percent-encoded.
fn encoded(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub(crate) fn solr_knn(core: &str, vector: &[f64], k: usize) -> Vec<String> {
    let q = format!("{{!knn f=vector topK={k}}}{}", json!(vector));
    let (status, answer) = http_json(
        "GET",
        &format!(
            "{}/{core}/select?q={}&fl=id,score&wt=json",
            solr_url(),
            encoded(&q)
        ),
        None,
    );
    assert_eq!(status, 200, "{answer}");
    answer["response"]["docs"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|d| d["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `knn` (a query vector and k: the ids found, nearest first) over the
/// indexed TEXTS puts the two texts about water first for a question about
/// water, and the pie first for one about baking. HNSW search is
/// approximate, and tight with a k of 1 on a tiny graph: ask for all four
/// and read the order.
fn assert_finds_the_nearest(knn: impl Fn(&[f64], usize) -> Vec<String>) {
    let nearest = knn(&embedding("a dam holding back water"), 4);
    let mut top: Vec<&str> = nearest.iter().take(2).map(String::as_str).collect();
    top.sort_unstable();
    assert_eq!(top, ["dam", "weir"], "{nearest:?}");
    let nearest = knn(&embedding("how long to bake a pie"), 4);
    assert_eq!(
        nearest.first().map(String::as_str),
        Some("pie"),
        "{nearest:?}"
    );
}

#[test]
fn solr_sets_up_a_vector_field_and_finds_the_nearest_chunks() {
    let core = solr_core_of("weir-managed");
    let vectors = r#"vectors = [{ field = "vector", dimensions = 256 }]"#;
    let (result, recording) = run_with(
        &docs(TEXTS),
        &embed_stage(),
        &solr_indexer(&core, vectors),
        "",
    );
    assert_success(&result, &recording);
    let all = crate::search::solr_query(&core, "*:*");
    assert_eq!(all["numFound"], 4, "{all}");
    assert_finds_the_nearest(|v, k| solr_knn(&core, v, k));

    // The field is there now: a second run checks it and goes on; a vector
    // of another size fails its own document with Solr's message.
    let (result, recording) = run_with(
        &docs(r#"[{ id = "short", vector = [0.5, 0.5, 0.5] }, { id = "plain" }]"#),
        "[]",
        &solr_indexer(&core, vectors),
        "",
    );
    let failed = failures(&recording);
    assert_eq!(
        failed.len(),
        1,
        "{failed:?} {:?}",
        result.connectors[0].error
    );
    assert_eq!(failed[0].0, "short");
    assert!(
        failed[0].1.contains("holds 3 numbers, not the 256"),
        "{failed:?}"
    );

    // A field of another size is refused at start, naming both.
    let (result, _) = run_with(
        &docs(r#"[{ id = "a" }]"#),
        "[]",
        &solr_indexer(&core, r#"vectors = [{ field = "vector", dimensions = 3 }]"#),
        "",
    );
    let error = result.connectors[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("field `vector`")
            && error.contains("not a DenseVectorField of 3 dimensions"),
        "{error}"
    );
}

#[test]
fn solr_says_what_to_add_when_the_schema_cannot_change() {
    let core = solr_core_of("weir");
    let (result, _) = run_with(
        &docs(r#"[{ id = "a" }]"#),
        "[]",
        &solr_indexer(
            &core,
            r#"vectors = [{ field = "vector", dimensions = 8, similarity = "dot_product" }]"#,
        ),
        "",
    );
    let error = result.connectors[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("cannot add the vector field `vector`")
            && error.contains(r#"vectorDimension="8" similarityFunction="dot_product""#),
        "{error}"
    );
}

pub(crate) fn os_knn(index: &str, vector: &[f64], k: usize) -> Vec<String> {
    let (status, answer) = crate::search::os(
        "POST",
        &format!("{index}/_search"),
        Some(
            json!({ "size": k, "_source": false, "query": { "knn": { "vector": { "vector": vector, "k": k } } } }),
        ),
    );
    assert_eq!(status, 200, "{answer}");
    answer["hits"]["hits"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter_map(|h| h["_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn opensearch_creates_a_knn_index_and_finds_the_nearest_chunks() {
    let index = crate::search::unique("vectors");
    let vectors = r#"vectors = [{ field = "vector", dimensions = 256 }]"#;
    let (result, recording) = run_with(
        &docs(TEXTS),
        &embed_stage(),
        &crate::search::opensearch_indexer(&index, vectors),
        "",
    );
    assert_success(&result, &recording);
    let (_, mapping) = crate::search::os("GET", &format!("{index}/_mapping"), None);
    assert_eq!(
        mapping[&index]["mappings"]["properties"]["vector"]["type"], "knn_vector",
        "{mapping}"
    );
    assert_finds_the_nearest(|v, k| os_knn(&index, v, k));

    // A second field is added to the index that exists; a vector of the
    // wrong size fails alone; a field of another size stops the run at start.
    let (result, recording) = run_with(
        &docs(r#"[{ id = "short", vector = [0.5, 0.5] }, { id = "small", small = [1, 0, 0] }]"#),
        "[]",
        &crate::search::opensearch_indexer(
            &index,
            r#"vectors = [{ field = "vector", dimensions = 256 }, { field = "small", dimensions = 3, similarity = "euclidean" }]"#,
        ),
        "",
    );
    let failed = failures(&recording);
    assert_eq!(
        failed.len(),
        1,
        "{failed:?} {:?}",
        result.connectors[0].error
    );
    assert!(
        failed[0].0 == "short" && failed[0].1.contains("holds 2 numbers, not the 256"),
        "{failed:?}"
    );
    let (_, mapping) = crate::search::os("GET", &format!("{index}/_mapping"), None);
    assert_eq!(
        mapping[&index]["mappings"]["properties"]["small"]["dimension"],
        3
    );
    let (result, _) = run_with(
        &docs(r#"[{ id = "a" }]"#),
        "[]",
        &crate::search::opensearch_indexer(
            &index,
            r#"vectors = [{ field = "small", dimensions = 4 }]"#,
        ),
        "",
    );
    let error = result.connectors[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("field `small`") && error.contains("not a knn_vector of 4 dimensions"),
        "{error}"
    );
}
