//! Messages from sources that never end (contract 0.2.2, world
//! `streaming-connector`): a Kafka topic, a message queue or documents
//! pushed to `weir serve`, as the connector's config grants them
//! (`grants.kafka`, `grants.queues`, `grants.push`). The host holds the
//! client; the connector names the grant, turns each message into
//! documents and says when it is done with it. The host acknowledges a
//! message (or commits its offset) only once every document published for
//! it is done: indexed, dropped, or failed and dead-lettered.
//!
//! A streaming connector implements [`crate::Connector`] as any other and is
//! exported with [`export_streaming_connector!`](crate::export_streaming_connector).
//! Its `execute` loops until the run stops:
//!
//! ```ignore
//! fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
//!     while let Some(batch) = messages::receive("orders", 512, 1000)? {
//!         for message in batch {
//!             match to_document(&message) {
//!                 Ok(doc) => {
//!                     messages::publish(publisher, &message, doc)?;
//!                     messages::finish(&message);
//!                 }
//!                 Err(why) => messages::reject(&message, &why),
//!             }
//!         }
//!     }
//!     Ok(()) // the run is stopping
//! }
//! ```

use crate::bindings::connector::weir::plugin::messages as host;
pub use crate::bindings::connector::weir::plugin::messages::{Message, ReceiveError};
use crate::{Document, PluginError, Publisher};

/// Most messages one [`receive`] answers.
pub const MAX_RECEIVE: u32 = 4096;

/// Up to `max` messages (1 to [`MAX_RECEIVE`]) from granted source
/// `source`, waiting at most `wait_ms` for the first: `Ok(None)` once the
/// run is stopping (return from `execute`), an empty batch when none came
/// in time. A source that failed (not granted, a client that cannot be
/// made) is a fatal error.
pub fn receive(source: &str, max: u32, wait_ms: u32) -> Result<Option<Vec<Message>>, PluginError> {
    match host::receive(source, max.clamp(1, MAX_RECEIVE), wait_ms) {
        Ok(batch) => Ok(Some(batch)),
        Err(ReceiveError::Stopping) => Ok(None),
        Err(ReceiveError::Failed(why)) => Err(PluginError::Fatal(why)),
    }
}

/// Publish `doc` as one of the documents of `message`. A refusal (the run
/// stopping, a document over its limits) is a fatal error naming why.
pub fn publish(publisher: &Publisher, message: &Message, doc: Document) -> Result<(), PluginError> {
    host::publish(publisher, message.handle, doc).map_err(PluginError::Fatal)
}

/// Publish a deletion marker for document `id` as one of the documents of
/// `message` (a tombstone, a delete event): the indexer deletes the
/// document, and the message is done once it has. A refusal is a fatal
/// error naming why.
pub fn delete(publisher: &Publisher, message: &Message, id: &str) -> Result<(), PluginError> {
    host::delete(publisher, message.handle, id).map_err(PluginError::Fatal)
}

/// Every document of `message` is published: the host acknowledges it once
/// they are done (at once when there were none).
pub fn finish(message: &Message) {
    host::finish(message.handle);
}

/// `message` is not a valid document: dead-lettered now with `reason`, its
/// origin and its attempt, never retried.
pub fn reject(message: &Message, reason: &str) {
    host::reject(message.handle, reason);
}

/// The message's body as UTF-8 text, if it is.
pub fn text(message: &Message) -> Option<&str> {
    std::str::from_utf8(&message.body).ok()
}

/// The message's header `name` (the first of that name), as UTF-8 text.
pub fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message
        .headers
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// Export a [`crate::Connector`] that receives messages: the same as
/// [`export_connector!`](crate::export_connector) (the SDK's connectors are
/// built for `syncing-connector` and `streaming-connector` at once).
#[macro_export]
macro_rules! export_streaming_connector {
    ($ty:ty) => {
        $crate::export_connector!($ty);
    };
}

/// What one message becomes, for [`consume`].
#[derive(Debug)]
pub enum Becomes {
    /// One document.
    Document(Document),
    /// The deletion of document `id` (a tombstone, a delete event).
    Delete(String),
    /// Nothing: the message is done with no document.
    Nothing,
}

/// The usual streaming connector's loop: `receive` batches of at most
/// `batch` from `source` (waiting `wait_ms` for each), at most `limit`
/// messages in all (`None`: until the run stops), and for each message
/// publish what `becomes` makes of it ([`Becomes`]) and finish it, or
/// `reject` it with the reason `Err` gives. Returns when the run stops or
/// the limit is reached.
pub fn consume(
    publisher: &Publisher,
    source: &str,
    batch: u32,
    wait_ms: u32,
    limit: Option<u64>,
    mut becomes: impl FnMut(&Message) -> Result<Becomes, String>,
) -> Result<(), PluginError> {
    let mut left = limit.unwrap_or(u64::MAX);
    while left > 0 {
        let max = u32::try_from(left.min(u64::from(batch))).unwrap_or(batch);
        let Some(received) = receive(source, max, wait_ms)? else {
            break;
        };
        left -= received.len() as u64;
        for message in received {
            match becomes(&message) {
                Ok(Becomes::Document(doc)) => publish(publisher, &message, doc)?,
                Ok(Becomes::Delete(id)) => delete(publisher, &message, &id)?,
                Ok(Becomes::Nothing) => {}
                Err(why) => {
                    reject(&message, &why);
                    continue;
                }
            }
            finish(&message);
        }
    }
    Ok(())
}
