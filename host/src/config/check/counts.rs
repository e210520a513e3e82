//! Counts and sizes: queues, threads and indexer batches at least 1,
//! indexer instances at most [`IndexerConfig::MAX_INSTANCES`].

use super::Found;
use crate::config::{Config, IndexerConfig, Problem};

pub(super) fn check(config: &Config, found: &mut Found) {
    let mut counts = vec![
        (
            "publisher.queue_capacity".to_owned(),
            config.publisher.queue_capacity,
        ),
        (
            "publisher.queue_max_mib".to_owned(),
            config.publisher.queue_max_mib,
        ),
        ("worker.threads".to_owned(), config.worker.threads),
    ];
    for (location, indexer) in config.indexers() {
        counts.push((format!("{location}.instances"), indexer.instances));
        if indexer.instances > IndexerConfig::MAX_INSTANCES {
            found.push(Problem::new(
                format!("{location}.instances"),
                format!("must be at most {}", IndexerConfig::MAX_INSTANCES),
            ));
        }
        counts.push((format!("{location}.batch_size"), indexer.batch_size));
        counts.push((
            format!("{location}.batch_max_bytes"),
            indexer.batch_max_bytes,
        ));
    }
    for (name, value) in counts {
        if value == 0 {
            found.push(Problem::new(name, "must be at least 1"));
        }
    }
}
