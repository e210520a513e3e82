//! The host side of `lending-packed` (contract 0.2.4): a lent batch's
//! fields read and changed as one text each, cut by lengths, instead of
//! JSON texts inside a JSON text (`lending`'s `get-json` and `update`).
//!
//! What is read and how each change is made are those of `fields` (the
//! same bounds, the same `set-json` and `remove`, journaled for a batch
//! that traps); only the way the text crosses differs.

use wasmtime::component::Resource;

use super::call_journal::Touch;
use super::fields::{MAX_EACH, naming};
use super::pieces::{ABSENT, cut};
use super::{PluginState, Wasm};
use crate::core::document;
use crate::plugin::bindings::FieldError;
use crate::plugin::bindings::packing_stage::weir::plugin::lending_packed::{
    Host, PackedChanges, PackedFields,
};
use crate::plugin::resources::LentBatch;

/// One change of `update-packed`: the position of its document, the
/// field's name, and its new JSON text (none to remove it).
type PackedChange<'t> = (usize, &'t str, Option<&'t str>);

impl Host for PluginState {
    fn get_packed(&mut self, _: Resource<LentBatch>, names: Vec<String>) -> Wasm<PackedFields> {
        let docs = self.lent_handles();
        let max = self.each_read_bounds(&docs, names.len())?;
        let mut text = Vec::new();
        let mut lengths = Vec::with_capacity(docs.len() * names.len());
        for h in &docs {
            let doc = self.doc(h)?;
            for name in &names {
                let Some(value) = doc.fields().get(name.as_str()) else {
                    lengths.push(ABSENT);
                    continue;
                };
                let start = text.len();
                document::write_json_value(&mut text, value);
                if text.len() > max {
                    return Err(self.refuse_answer_over(max));
                }
                lengths.push(u32::try_from(text.len() - start)?);
            }
        }
        Ok(PackedFields {
            text: String::from_utf8(text)?,
            lengths,
        })
    }

    fn update_packed(
        &mut self,
        _: Resource<LentBatch>,
        changes: PackedChanges,
    ) -> Wasm<Vec<(u32, FieldError)>> {
        let docs = self.lent_handles();
        // A call cut up wrongly is the plugin's error (no limit it ran
        // into, as for `publish-packed`): nothing of it is made.
        let planned = changes_of(&changes, docs.len()).map_err(|why| {
            wasmtime::format_err!("`update-packed` was given changes it cannot read: {why}")
        })?;
        let mut stopped = vec![false; docs.len()];
        let mut failed = Vec::new();
        for (at, name, json) in planned {
            if stopped[at] {
                continue;
            }
            let h = &docs[at];
            let done = match json {
                Some(json) => self.replace(h, name, |max| document::parse_value_within(json, max)),
                None => self.edit(h, Touch::Whole, |doc| doc.remove(name).map(drop)),
            }?;
            if let Err(e) = done {
                stopped[at] = true;
                failed.push((u32::try_from(at)?, naming(name, e)));
            }
        }
        Ok(failed)
    }
}

/// The changes `packed` holds for a batch of `size` documents, checked
/// whole before the first is made: three numbers each, at most
/// [`MAX_EACH`], every position in the batch, and the text cut exactly.
fn changes_of(packed: &PackedChanges, size: usize) -> Result<Vec<PackedChange<'_>>, String> {
    let numbers = &packed.changes;
    if !numbers.len().is_multiple_of(3) {
        return Err(format!(
            "{} numbers: three are needed for each change (its document's position, its name's length, its JSON text's length)",
            numbers.len()
        ));
    }
    if numbers.len() / 3 > MAX_EACH {
        return Err(format!(
            "{} changes in one call; it takes at most {MAX_EACH}",
            numbers.len() / 3
        ));
    }
    let mut lengths = Vec::with_capacity(numbers.len() / 3 * 2);
    for (i, change) in numbers.chunks_exact(3).enumerate() {
        let &[at, name, json] = change else {
            unreachable!("chunks of three")
        };
        if at as usize >= size {
            return Err(format!(
                "change {i} is for the document at {at}, past the batch's {size}"
            ));
        }
        lengths.push(name);
        if json != ABSENT {
            lengths.push(json);
        }
    }
    let mut pieces = cut(&packed.text, lengths)?.into_iter();
    Ok(numbers
        .chunks_exact(3)
        .map(|change| {
            let name = pieces.next().unwrap_or_default();
            let json = (change[2] != ABSENT).then(|| pieces.next().unwrap_or_default());
            (change[0] as usize, name, json)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(text: &str, changes: &[u32]) -> PackedChanges {
        PackedChanges {
            text: text.to_owned(),
            changes: changes.to_vec(),
        }
    }

    #[test]
    fn packed_changes_are_cut_into_positions_names_and_json() {
        let changes = packed("title\"a\"tagsé[1]", &[0, 5, 3, 1, 4, ABSENT, 1, 2, 3]);
        assert_eq!(
            changes_of(&changes, 2).expect("cut"),
            [
                (0, "title", Some("\"a\"")),
                (1, "tags", None),
                (1, "é", Some("[1]")),
            ]
        );
        assert_eq!(changes_of(&packed("", &[]), 0).expect("cut"), []);
    }

    #[test]
    fn packed_changes_cut_wrongly_are_refused_whole() {
        let refused = |text: &str, numbers: &[u32], size| {
            changes_of(&packed(text, numbers), size).expect_err("refused")
        };
        let two = refused("a1", &[0, 1], 1);
        assert!(two.contains("2 numbers"), "{two}");
        let past_batch = refused("a1", &[0, 1, 1, 2, 1, 1], 2);
        assert!(
            past_batch.contains("change 1 is for the document at 2"),
            "{past_batch}"
        );
        let past_text = refused("a1", &[0, 1, 2], 1);
        assert!(past_text.contains("past the text's 2 bytes"), "{past_text}");
        let inside = refused("é1", &[0, 1, 2], 1);
        assert!(inside.contains("inside a character"), "{inside}");
        let short = refused("a1b", &[0, 1, 1], 1);
        assert!(short.contains("cover 2 of the text's 3 bytes"), "{short}");
        let huge = refused("a", &[0, u32::MAX - 1, 0], 1);
        assert!(huge.contains("past"), "{huge}");
        let many = vec![0; 3 * (MAX_EACH + 1)];
        let too_many = refused("", &many, 1);
        assert!(too_many.contains("65537 changes"), "{too_many}");
        assert!(changes_of(&packed("", &vec![0; 3 * MAX_EACH]), 1).is_ok());
    }
}
