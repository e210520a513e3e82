//! The Rust parts of `weir new`: the vendored SDK and the plugin sources.

/// The Rust SDK, vendored as a path dependency (its bindings read
/// `../../wit`). Its `http` and `content` features (`http.rs`, `search.rs`,
/// `content.rs`) are left out: the vendored crate has no such features.
pub(super) const RUST_SDK: &[(&str, &str)] = &[
    (
        ".weir/sdk-rust/src/lib.rs",
        include_str!("../../../../plugins/sdk/src/lib.rs"),
    ),
    (
        ".weir/sdk-rust/src/batch.rs",
        include_str!("../../../../plugins/sdk/src/batch.rs"),
    ),
    (
        ".weir/sdk-rust/src/cache.rs",
        include_str!("../../../../plugins/sdk/src/cache.rs"),
    ),
    (
        ".weir/sdk-rust/src/config.rs",
        include_str!("../../../../plugins/sdk/src/config.rs"),
    ),
    (
        ".weir/sdk-rust/src/connector.rs",
        include_str!("../../../../plugins/sdk/src/connector.rs"),
    ),
    (
        ".weir/sdk-rust/src/document.rs",
        include_str!("../../../../plugins/sdk/src/document.rs"),
    ),
    (
        ".weir/sdk-rust/src/field_stage.rs",
        include_str!("../../../../plugins/sdk/src/field_stage.rs"),
    ),
    (
        ".weir/sdk-rust/src/fields.rs",
        include_str!("../../../../plugins/sdk/src/fields.rs"),
    ),
    (
        ".weir/sdk-rust/src/messages.rs",
        include_str!("../../../../plugins/sdk/src/messages.rs"),
    ),
    (
        ".weir/sdk-rust/src/indexer.rs",
        include_str!("../../../../plugins/sdk/src/indexer.rs"),
    ),
    (
        ".weir/sdk-rust/src/logging.rs",
        include_str!("../../../../plugins/sdk/src/logging.rs"),
    ),
    (
        ".weir/sdk-rust/src/outbox.rs",
        include_str!("../../../../plugins/sdk/src/outbox.rs"),
    ),
    (
        ".weir/sdk-rust/src/packed.rs",
        include_str!("../../../../plugins/sdk/src/packed.rs"),
    ),
    (
        ".weir/sdk-rust/src/progress.rs",
        include_str!("../../../../plugins/sdk/src/progress.rs"),
    ),
    (
        ".weir/sdk-rust/src/sql.rs",
        include_str!("../../../../plugins/sdk/src/sql.rs"),
    ),
    (
        ".weir/sdk-rust/src/sweep.rs",
        include_str!("../../../../plugins/sdk/src/sweep.rs"),
    ),
    (
        ".weir/sdk-rust/src/sync.rs",
        include_str!("../../../../plugins/sdk/src/sync.rs"),
    ),
    (
        ".weir/sdk-rust/src/values.rs",
        include_str!("../../../../plugins/sdk/src/values.rs"),
    ),
    (
        ".weir/sdk-rust/Cargo.toml",
        r#"[package]
name = "weir-plugin"
version = "0.2.5"
edition = "2024"
publish = false

[dependencies]
wit-bindgen = "0.63"
serde = { version = "1", features = ["derive"] }
serde_json = { version = "1", features = ["preserve_order", "arbitrary_precision"] }
serde_path_to_error = "0.1"
# `sql` hands bytes over as base64.
base64 = "0.22"
# Content addresses for the host's cache (`weir_plugin::cache::key`).
sha2 = "0.10"
# Its setting types describe themselves (the plugin reference is made from them).
schemars = { version = "1.2", default-features = false, features = ["derive", "std"] }
"#,
    ),
];

/// A batch stage: the host hands it several documents per call.
pub(super) const RUST_STAGE: &str = r#"//! {{name}}: upper-cases the text of one field.
//!
//! A batch stage: Weir hands it a batch of documents per call (the stage's
//! `batch = { size, wait }` in a pipeline says how many, and how long to
//! wait for them), and it says what became of each document.

use weir_plugin::{BatchStage, Document, Outcome, PluginError, doc_error, per_document};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The field to upper-case.
    field: String,
}

struct Upper(Config);

impl BatchStage for Upper {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        // One outcome per document, in order: an error fails only its document.
        Ok(per_document(docs, |doc| self.upper(doc)))
    }
}

impl Upper {
    fn upper(&self, doc: &Document) -> Result<(), PluginError> {
        if let Some(text) = doc.get_string(&self.0.field) {
            doc.set_string(&self.0.field, &text.to_uppercase())
                .map_err(doc_error)?;
        }
        Ok(())
    }
}

weir_plugin::export_batch_stage!(Upper);
"#;

pub(super) const RUST_CONNECTOR: &str = r#"//! {{name}}: publishes `count` numbered documents.

use weir_plugin::{Connector, Document, PluginError, Publisher, Value, doc_error};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// How many documents to publish.
    count: u32,
}

struct Numbers(Config);

impl Connector for Numbers {
    type Config = Config;

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self(config))
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        // How many it will publish: `weir run` shows the share done and the time left.
        weir_plugin::progress::expect(publisher, self.0.count.into());
        for n in 0..self.0.count {
            let doc = Document::new(&format!("doc-{n}"));
            doc.set("n", &Value::Integer(n.into())).map_err(doc_error)?;
            publisher.publish(doc).map_err(PluginError::Fatal)?;
        }
        Ok(())
    }
}

weir_plugin::export_connector!(Numbers);
"#;

pub(super) const RUST_INDEXER: &str = r#"//! {{name}}: appends each document as a JSON line to a file.

use std::fs::File;
use std::io::Write;

use weir_plugin::{BatchEntry, BatchError, DocumentFailure, Indexer, batch_error};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The file to write, in a directory granted to the plugin.
    path: String,
}

struct Lines(File);

impl Indexer for Lines {
    type Config = Config;

    fn start(config: Config) -> Result<Self, String> {
        File::create(&config.path)
            .map(Self)
            .map_err(|e| format!("cannot create {}: {e}", config.path))
    }

    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        let mut text = String::new();
        for entry in batch {
            text.push_str(&entry.json.unwrap_or_default());
            text.push('\n');
        }
        self.0
            .write_all(text.as_bytes())
            .map_err(|e| batch_error(format!("write failed: {e}")))?;
        Ok(Vec::new())
    }
}

weir_plugin::export_indexer!(Lines);
"#;

#[cfg(test)]
mod tests {
    use super::RUST_SDK;
    use std::path::Path;

    /// Every source file of the SDK is vendored, but those behind its `http`
    /// and `content` features (a module added and forgotten would break every
    /// project).
    #[test]
    fn projects_vendor_every_rust_sdk_file() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/sdk/src");
        for entry in std::fs::read_dir(&src).expect("sdk src").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if matches!(name.as_str(), "http.rs" | "search.rs" | "content.rs") {
                continue;
            }
            let wanted = format!(".weir/sdk-rust/src/{name}");
            assert!(
                RUST_SDK.iter().any(|(p, _)| *p == wanted),
                "plugins/sdk/src/{name} is not vendored by `weir new`"
            );
        }
    }
}
