//! Weir's integration tests, compiled into one binary (one module per topic).
//! Every test loads real components built from `plugins/` through the real
//! runtime.

mod accounting;
mod admission;
mod architecture;
mod batch;
mod blocking_io;
mod bundled_batch;
mod cache;
mod cli;
mod conditions;
mod conformance;
mod connector_indexer;
mod embeddings;
mod extraction;
mod failures;
mod field_stages;
mod isolation;
mod kafka;
mod lent;
mod limits;
mod local_run;
mod operations;
mod rag;
mod run_timeouts;
mod sandbox;
mod scaffold;
mod sdk;
mod search;
mod serve_limits;
mod stages;
mod sync;
mod tenants;
mod text_stages;
mod transcripts;
mod vectors;
