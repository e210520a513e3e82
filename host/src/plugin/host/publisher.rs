//! The host side of the `publishing` interface: what a connector's
//! publisher handle ([`Publisher`]) does with the documents it is given,
//! one a call (`publish`) or packed (`publish-packed`, 0.2.3), and how many
//! it expects to publish (`progress`, 0.2.5).

use wasmtime::component::Resource;

use super::document::made;
use super::fields::MAX_PER_CALL;
use super::pieces;
use super::{Handle, PluginState, Wasm};
use crate::core::document::Document;
use crate::plugin::bindings::connector;
use crate::plugin::bindings::counting_connector::weir::plugin::progress;
use crate::plugin::bindings::packing_connector::weir::plugin::publishing_packed::{
    self, PackedDocuments, PackedReason, PackedRefusal,
};
use crate::plugin::resources::Publisher;

impl connector::weir::plugin::publishing::Host for PluginState {}

impl PluginState {
    /// Send `doc` through the connector's publisher `h`: refused when it is
    /// over the document limit, else as the sink answers.
    pub(super) fn publish_document(
        &mut self,
        h: &Resource<Publisher>,
        doc: Document,
    ) -> Wasm<Result<(), String>> {
        let bytes = doc.approx_json_bytes();
        let max = self.budget.doc_limits.max_bytes;
        if bytes > max {
            // A copy of a child built under larger limits, say.
            return Ok(Err(format!(
                "document `{}` is about {bytes} bytes, over the limit of {} MiB ({})",
                doc.id(),
                max >> 20,
                crate::core::limit::Limit::MaxDocumentMib
            )));
        }
        // The call's deadline (kept for HTTP too): waiting for room in a full
        // pipeline must not outlast it.
        let deadline = self
            .http_policy
            .deadline
            .unwrap_or_else(|| std::time::Instant::now() + std::time::Duration::from_secs(1));
        Ok(self.table.get_mut(h)?.publish(doc, deadline))
    }
}

impl connector::weir::plugin::publishing::HostPublisher for PluginState {
    fn publish(&mut self, h: Resource<Publisher>, doc: Handle) -> Wasm<Result<(), String>> {
        // Handed over: no longer held by the connector, published or not.
        let doc = self.take_back(doc)?;
        self.publish_document(&h, doc)
    }

    fn drop(&mut self, h: Resource<Publisher>) -> Wasm<()> {
        self.table.delete(h)?;
        Ok(())
    }
}

impl progress::Host for PluginState {
    fn expect(&mut self, h: Resource<Publisher>, documents: u64) -> Wasm<()> {
        self.table.get_mut(&h)?.expect(documents);
        Ok(())
    }
}

impl publishing_packed::Host for PluginState {
    fn publish_packed(
        &mut self,
        h: Resource<Publisher>,
        docs: PackedDocuments,
    ) -> Wasm<Result<(), PackedRefusal>> {
        // A call cut up wrongly is the plugin's error: nothing of it is
        // published.
        let pieces = cut(&docs.text, &docs.lengths).map_err(|why| {
            wasmtime::format_err!("`publish-packed` was given documents it cannot read: {why}")
        })?;
        let limits = self.budget.doc_limits;
        for (at, (id, json)) in pieces.enumerate() {
            let refusal = |reason| PackedRefusal {
                at: u32::try_from(at).unwrap_or(u32::MAX),
                reason,
            };
            let doc = made(json, limits, |json, limits| {
                Document::from_fields_json_str(id, json, limits)
            });
            let doc = match doc {
                Ok(doc) => doc,
                Err(e) => return Ok(Err(refusal(PackedReason::Invalid(e)))),
            };
            if let Err(why) = self.publish_document(&h, doc)? {
                return Ok(Err(refusal(PackedReason::Refused(why))));
            }
        }
        Ok(Ok(()))
    }
}

/// The (id, JSON text) pieces `lengths` cuts `text` into, checked whole
/// before the first is read: at most [`MAX_PER_CALL`] documents, two pieces
/// each, every piece on a character boundary, and all of `text` covered.
fn cut<'t>(
    text: &'t str,
    lengths: &[u32],
) -> Result<impl Iterator<Item = (&'t str, &'t str)> + 't, String> {
    if !lengths.len().is_multiple_of(2) {
        return Err(format!(
            "{} lengths: two are needed for each document (its id, then its JSON text)",
            lengths.len()
        ));
    }
    if lengths.len() / 2 > MAX_PER_CALL {
        return Err(format!(
            "{} documents in one call; it takes at most {MAX_PER_CALL}",
            lengths.len() / 2
        ));
    }
    let pieces = pieces::cut(text, lengths.iter().copied())?;
    let mut pieces = pieces.into_iter();
    Ok(std::iter::from_fn(move || {
        Some((pieces.next()?, pieces.next()?))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str, lengths: &[u32]) -> Result<Vec<(String, String)>, String> {
        Ok(cut(text, lengths)?
            .map(|(id, json)| (id.to_owned(), json.to_owned()))
            .collect())
    }

    #[test]
    fn packed_text_is_cut_into_ids_and_json_in_order() {
        let text = "a{\"x\":1}bé{}";
        assert_eq!(
            pieces(text, &[1, 7, 3, 2]).expect("cut"),
            [
                ("a".to_owned(), "{\"x\":1}".to_owned()),
                ("bé".to_owned(), "{}".to_owned())
            ]
        );
        assert_eq!(pieces("", &[]).expect("cut"), []);
    }

    #[test]
    fn packed_text_cut_wrongly_is_refused_whole() {
        let odd = pieces("a{}", &[1, 2, 0]).expect_err("refused");
        assert!(odd.contains("3 lengths"), "{odd}");
        let past = pieces("a{}", &[1, 3]).expect_err("refused");
        assert!(past.contains("past the text's 3 bytes"), "{past}");
        let inside = pieces("é{}", &[1, 3]).expect_err("refused");
        assert!(inside.contains("inside a character"), "{inside}");
        let short = pieces("a{}b{}", &[1, 2]).expect_err("refused");
        assert!(short.contains("cover 3 of the text's 6 bytes"), "{short}");
        let overflow = pieces("a{}", &[1, u32::MAX, u32::MAX, u32::MAX]).expect_err("refused");
        assert!(overflow.contains("past"), "{overflow}");
        let many = vec![0; 2 * (MAX_PER_CALL + 1)];
        let too_many = pieces("", &many).expect_err("refused");
        assert!(too_many.contains("4097 documents"), "{too_many}");
        assert!(pieces("", &vec![0; 2 * MAX_PER_CALL]).is_ok());
    }
}
