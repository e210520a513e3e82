//! `[publisher]`: how connectors hand documents to workers.

use serde::{Deserialize, Serialize};

/// `[publisher]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PublisherConfig {
    /// Documents each in-memory queue holds before senders block. Default
    /// 1,000: enough to keep workers and indexers fed (ten default indexer
    /// batches), and few enough that the documents in flight stay in the
    /// CPU's caches (measured on the local benchmark: ~4% less CPU per
    /// document and a third less memory than 10,000, same wall time).
    #[serde(default = "PublisherConfig::default_queue_capacity")]
    pub queue_capacity: usize,
    /// MiB of documents each in-memory queue holds before senders block; a
    /// larger document goes alone. Default 256.
    #[serde(default = "PublisherConfig::default_queue_max_mib")]
    pub queue_max_mib: usize,
    /// Most documents connectors publish per second, all together; no
    /// ceiling by default.
    #[serde(default)]
    pub max_docs_per_second: Option<u32>,
}

impl PublisherConfig {
    fn default_queue_capacity() -> usize {
        1_000
    }
    fn default_queue_max_mib() -> usize {
        256
    }
    /// [`PublisherConfig::queue_max_mib`] in bytes.
    pub fn queue_max_bytes(&self) -> usize {
        self.queue_max_mib.saturating_mul(1 << 20)
    }
}

impl Default for PublisherConfig {
    fn default() -> Self {
        Self {
            queue_capacity: Self::default_queue_capacity(),
            queue_max_mib: Self::default_queue_max_mib(),
            max_docs_per_second: None,
        }
    }
}
