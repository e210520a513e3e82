//! The backends of sources that never end (`core::messages::Source`), one
//! folder per kind, and the one place that opens a granted source by its
//! kind ([`open`]): `grants.kafka` (`kafka/`, rdkafka), `grants.queues`,
//! `grants.push`.
//!
//! A new kind is a case of `plugin::SourceGrant` and one arm in [`open`]
//! calling its backend; the run (`run/deliveries.rs`) does the rest: it
//! tracks each delivery's documents and settles it with its source.

pub(crate) mod kafka;
pub mod push;
pub mod queue;

use std::sync::Arc;

use crate::core::messages::Source;
use crate::plugin::SourceGrant;

/// Who opens a source, for its client's names and for admission.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opening<'a> {
    /// The run's id.
    pub(crate) run_id: &'a str,
    /// The pipeline and the connector whose grant it is.
    pub(crate) pipeline: &'a str,
    pub(crate) connector: &'a str,
    /// The grant's name, as the plugin uses it.
    pub(crate) name: &'a str,
    /// Where the run's pushed documents go (`grants.push`).
    pub(crate) pushes: &'a push::Pushes,
}

/// Open granted source `grant` for a connector's run. `Err` says why it
/// cannot be (the run then fails before its connector starts); a source
/// that cannot reach its broker yet opens, and reconnects by itself.
pub(crate) fn open(grant: SourceGrant<'_>, at: &Opening<'_>) -> Result<Arc<dyn Source>, String> {
    let opened: Result<Arc<dyn Source>, String> = match grant {
        SourceGrant::Kafka(kafka) => {
            kafka::KafkaSource::open(kafka, at).map(|s| Arc::new(s) as Arc<dyn Source>)
        }
        SourceGrant::Queue(queue) => {
            queue::QueueSource::open(queue, at).map(|s| Arc::new(s) as Arc<dyn Source>)
        }
        SourceGrant::Push(push) => Ok(at.pushes.open(at.name, push) as Arc<dyn Source>),
    };
    opened.map_err(|e| format!("{}.{}: {e}", grant.table(), at.name))
}
