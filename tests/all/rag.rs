//! examples/rag end to end on the real servers: its folder of HTML, PDF and
//! DOCX files walked, extracted (each extractor only for its own kind), chunked, the chunks
//! embedded by the real model and indexed into Solr with vectors; a kNN
//! query with a question's vector finds a chunk of the file that answers it.

use std::sync::Arc;

use serde_json::Value;
use weir::run::{RunStatus, Runner};
use weir::testing::recording::RecordingMessengers;
use weir_tests::{
    embedder_url, http_grants, opensearch_url, plugins_dir, repo_root, runtime, solr_url,
};

use crate::search::{solr_core_of, solr_query};
use crate::vectors::{embedding, solr_knn};

/// examples/rag/rag.toml pointed at the test servers; its indexer the
/// one the comment above `[indexer.plugin]` gives for OpenSearch, into
/// `opensearch_index`, when one is given.
fn rag_config(core: &str, opensearch_index: Option<&str>) -> weir::config::Config {
    let example = repo_root().join("examples").join("rag");
    let mut text =
        std::fs::read_to_string(example.join("rag.toml")).expect("examples/rag/rag.toml");
    if let Some(index) = opensearch_index {
        let (head, _) = text
            .split_once("[indexer.plugin]")
            .expect("[indexer.plugin]");
        let lines: Vec<&str> = head
            .lines()
            .rev()
            .take_while(|l| l.starts_with("#   "))
            .collect();
        let block: Vec<&str> = lines.iter().rev().map(|l| &l[4..]).collect();
        text = format!("{head}[indexer.plugin]\n{}\n", block.join("\n"))
            .replace(
                "http://127.0.0.1:${WEIR_OPENSEARCH_PORT:-19200}",
                opensearch_url(),
            )
            .replace(
                "[\"127.0.0.1:${WEIR_OPENSEARCH_PORT:-19200}\"]",
                &http_grants(opensearch_url()),
            )
            .replace("index = \"rag\"", &format!("index = \"{index}\""));
    }
    let text = text
        .replace(
            "\"../../plugins/dist/",
            &format!("\"{}/", plugins_dir().display()),
        )
        .replace("http://127.0.0.1:${WEIR_SOLR_PORT:-18983}/solr", solr_url())
        .replace(
            "[\"127.0.0.1:${WEIR_SOLR_PORT:-18983}\"]",
            &http_grants(solr_url()),
        )
        .replace(
            "http://127.0.0.1:${WEIR_EMBEDDER_PORT:-18090}",
            embedder_url(),
        )
        .replace(
            "[\"127.0.0.1:${WEIR_EMBEDDER_PORT:-18090}\"]",
            &http_grants(embedder_url()),
        )
        .replace("collection = \"rag\"", &format!("collection = \"{core}\""));
    let unset = (text.lines())
        .filter(|line| !line.trim_start().starts_with('#'))
        .any(|line| line.contains("${"));
    assert!(
        !unset,
        "every port variable is pointed at a test server:\n{text}"
    );
    let config = weir::config::Config::parse(&text, &example, std::iter::empty())
        .unwrap_or_else(|e| panic!("rag.toml: {e}\n{text}"));
    assert!(config.check().is_empty(), "{:?}", config.check());
    config
}

fn run(config: weir::config::Config) {
    let messengers = RecordingMessengers::new(64);
    let recording = messengers.recording();
    let result = Runner::new(config, runtime(), Arc::new(messengers))
        .run()
        .expect("valid");
    assert_eq!(
        result.status(),
        RunStatus::Success,
        "{result:?} {:?}",
        recording.failed()
    );
}

/// The questions and the file whose chunk answers each.
const QUESTIONS: [(&str, &str); 3] = [
    ("how long should bread bake in the oven?", "bread.docx"),
    ("when is my income tax return due?", "taxes.pdf"),
    (
        "why did millers build barriers across rivers?",
        "rivers.html",
    ),
];

#[test]
fn the_rag_example_finds_the_chunk_that_answers_a_question() {
    let core = solr_core_of("weir-managed");
    run(rag_config(&core, None));
    let all = solr_query(&core, "*:*");
    let chunks = solr_query(&core, "parent_id:*");
    let parents = solr_query(&core, "-parent_id:*");
    assert_eq!(parents["numFound"], 3, "{parents}");
    assert!(chunks["numFound"].as_u64() >= Some(6), "{chunks}");
    assert_eq!(
        all["numFound"].as_u64(),
        Some(3 + chunks["numFound"].as_u64().unwrap_or(0))
    );
    let extracted = |id: &str, needle: &str| {
        let doc = parents["docs"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["id"] == id))
            .cloned()
            .unwrap_or(Value::Null);
        assert!(doc.to_string().contains(needle), "{id}: {doc}");
    };
    // Each file's id is its path in the folder; its bytes are not indexed.
    extracted("rivers.html", "A weir is a low barrier");
    extracted("bread.docx", "knead it for ten minutes");
    extracted("taxes.pdf", "fifteenth of April");
    assert!(
        !parents.to_string().contains("\"content\""),
        "the files' base64 is dropped: {parents}"
    );

    for (question, file) in QUESTIONS {
        let hits = solr_knn(&core, &embedding(question), 10);
        let first = hits.first().cloned().unwrap_or_default();
        assert!(
            first.starts_with(&format!("{file}-")),
            "{question}: {hits:?}"
        );
    }
}

#[test]
fn the_rag_example_runs_into_opensearch_with_knn_vectors() {
    let index = crate::search::unique("rag");
    run(rag_config("unused", Some(&index)));
    for (question, file) in QUESTIONS {
        let hits = crate::vectors::os_knn(&index, &embedding(question), 10);
        let first = hits.first().cloned().unwrap_or_default();
        assert!(
            first.starts_with(&format!("{file}-")),
            "{question}: {hits:?}"
        );
    }
}
