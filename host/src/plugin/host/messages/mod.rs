//! The host side of the `messages` interface (contract 0.2.2, world
//! `streaming-connector`): a connector receives messages from the sources
//! its config grants (`grants.kafka`, ...), publishes documents for each,
//! then finishes or rejects it.
//!
//! What the run does with them is behind [`MessageSession`], which the run
//! layer implements for each connector run (`run/deliveries.rs`): the
//! sources it opened, the handles of the messages in flight, and which
//! documents each made. Here: the bounds of each call (at most
//! [`MAX_RECEIVE`] messages, a wait no longer than the call's deadline),
//! and the documents taken back from the plugin.

use std::time::{Duration, Instant};

use wasmtime::component::Resource;

use super::{Handle, PluginState, Wasm};
use crate::core::document::Document;
use crate::core::messages::{Delivery, ReceiveError};
use crate::plugin::bindings::streaming_connector::weir::plugin::messages::{
    self, Message, ReceiveError as WitReceiveError,
};
use crate::plugin::resources::Publisher;

/// Most messages one `receive` answers.
pub const MAX_RECEIVE: usize = 4096;

/// What a run offers a streaming connector: its granted sources and the
/// messages in flight, by the handles it gave them.
pub trait MessageSession: Send + Sync {
    /// Up to `max` messages from granted source `source`, waiting at most
    /// `wait` for the first, each with the handle the plugin names it by.
    fn receive(
        &self,
        source: &str,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<(u64, Delivery)>, ReceiveError>;
    /// Publish one document of message `handle` by calling `publish` (the
    /// documents it publishes are the message's); `Err` without calling it
    /// when the handle is unknown, finished or rejected.
    fn publish_for(
        &self,
        handle: u64,
        publish: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), String>;
    /// Every document of `handle` is published; false for an unknown handle.
    fn finish(&self, handle: u64) -> bool;
    /// `handle` is not a valid document: dead-lettered now with `reason`;
    /// false for an unknown handle.
    fn reject(&self, handle: u64, reason: &str) -> bool;
}

const NO_SOURCES: &str = "this connector is not run with sources (only a connector of a `weir run` or `weir serve` run whose config grants them has any)";

impl PluginState {
    /// The time left of the call in progress, at most `wanted`.
    fn wait_within_call(&self, wanted: Duration) -> Duration {
        self.http_policy.deadline.map_or(wanted, |at| {
            wanted.min(at.saturating_duration_since(Instant::now()))
        })
    }

    fn unknown_message(&self, handle: u64, what: &str) {
        tracing::warn!(
            plugin = %self.plugin,
            handle,
            "the connector {what} a message handle that is not in flight (unknown, finished or rejected): ignored"
        );
    }
}

impl messages::Host for PluginState {
    fn receive(
        &mut self,
        source: String,
        max: u32,
        wait_ms: u32,
    ) -> Wasm<Result<Vec<Message>, WitReceiveError>> {
        let Some(session) = self.messages.clone() else {
            return Ok(Err(WitReceiveError::Failed(NO_SOURCES.into())));
        };
        let max = (max as usize).clamp(1, MAX_RECEIVE);
        let wait = self.wait_within_call(Duration::from_millis(u64::from(wait_ms)));
        Ok(match session.receive(&source, max, wait) {
            Ok(deliveries) => Ok(deliveries
                .into_iter()
                .map(|(handle, d)| Message {
                    handle,
                    origin: d.origin,
                    key: d.key,
                    body: d.body,
                    headers: d.headers,
                    timestamp_ms: d.timestamp_ms,
                    attempt: d.attempt,
                })
                .collect()),
            Err(ReceiveError::Stopping) => Err(WitReceiveError::Stopping),
            Err(ReceiveError::Failed(why)) => Err(WitReceiveError::Failed(why)),
        })
    }

    fn publish(
        &mut self,
        h: Resource<Publisher>,
        message: u64,
        doc: Handle,
    ) -> Wasm<Result<(), String>> {
        // Handed over: no longer held by the connector, published or not.
        let doc = self.take_back(doc)?;
        self.publish_for_message(&h, message, doc)
    }

    fn delete(
        &mut self,
        h: Resource<Publisher>,
        message: u64,
        id: String,
    ) -> Wasm<Result<(), String>> {
        match self.deletion_marker(id) {
            Ok(marker) => self.publish_for_message(&h, message, marker),
            Err(why) => Ok(Err(why)),
        }
    }

    fn finish(&mut self, message: u64) -> Wasm<()> {
        let known = self.messages.as_ref().is_some_and(|s| s.finish(message));
        if !known {
            self.unknown_message(message, "finished");
        }
        Ok(())
    }

    fn reject(&mut self, message: u64, reason: String) -> Wasm<()> {
        let reason = crate::core::text::clip_message(reason);
        let known = self
            .messages
            .as_ref()
            .is_some_and(|s| s.reject(message, &reason));
        if !known {
            self.unknown_message(message, "rejected");
        }
        Ok(())
    }
}

impl PluginState {
    /// Publish `doc` as one of message `message`'s documents.
    fn publish_for_message(
        &mut self,
        h: &Resource<Publisher>,
        message: u64,
        doc: Document,
    ) -> Wasm<Result<(), String>> {
        let Some(session) = self.messages.clone() else {
            return Ok(Err(NO_SOURCES.into()));
        };
        let mut doc = Some(doc);
        let mut trap = None;
        let published = session.publish_for(message, &mut || {
            let Some(doc) = doc.take() else {
                return Err("the document was published already".into());
            };
            match self.publish_document(h, doc) {
                Ok(answer) => answer,
                Err(e) => {
                    trap = Some(e);
                    Err("the publisher handle is not the connector's".into())
                }
            }
        });
        if let Some(trap) = trap {
            return Err(trap);
        }
        Ok(published)
    }
}
