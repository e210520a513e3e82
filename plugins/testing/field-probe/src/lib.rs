//! A [`FieldStage`] of the Rust SDK for the host's tests: every kind of
//! change a plan can say, packed or through the document's handle.
//!
//! It reads `act`, sets `seen` to `"yes"` on every document, and then, as
//! `act` says:
//!
//! - `add`: appends 1 to `tags` (a change the packed text does not carry),
//!   then sets `after` to 2: all of the document's changes then go through
//!   its handle, in order;
//! - `error`: sets `partial` to 1, then fails the document;
//! - `refused`: sets the reserved `id` (the host refuses it), then `after`;
//! - `handle`: sets `direct` through the document's handle, then `after`;
//! - `texts`: sets `many` to two texts, one with a quote;
//! - `remove`: removes `act`;
//! - `many`: sets `f0` to `f15` (17 changes with `seen`);
//! - `straddle`: sets no `seen`; sets the reserved `id`, then `after`: after
//!   3,855 `many` documents (65,535 changes) the refused change is the last
//!   of the first `update-packed` call, and `after` would be in the next.

use weir_plugin::{Changes, FieldChange, FieldStage, Lent, PluginError, Value, serde_json};

#[derive(serde::Deserialize)]
struct Config {}

struct FieldProbe {
    reads: Vec<String>,
}

impl FieldStage for FieldProbe {
    type Config = Config;

    fn start(_config: Config) -> Result<Self, String> {
        Ok(Self {
            reads: vec!["act".into()],
        })
    }

    fn reads(&self) -> &[String] {
        &self.reads
    }

    fn plan(
        &mut self,
        fields: &[Option<&str>],
        doc: &Lent<'_>,
        changes: &mut Changes<'_>,
    ) -> Result<(), PluginError> {
        let act: String = fields[0]
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        if act != "straddle" {
            changes.set_text("seen", "yes");
        }
        match act.as_str() {
            "add" => {
                changes.push(FieldChange::add("tags", Value::Integer(1)));
                changes.set_json("after", "2");
            }
            "error" => {
                changes.set_json("partial", "1");
                return Err(PluginError::Document("failed on purpose".into()));
            }
            "many" => {
                for i in 0..16 {
                    changes.set_json(&format!("f{i}"), &i.to_string());
                }
            }
            "refused" | "straddle" => {
                changes.set_text("id", "other");
                changes.set_json("after", "2");
            }
            "handle" => {
                doc.document()
                    .set("direct", &Value::Text("through the handle".into()))
                    .map_err(weir_plugin::doc_error)?;
                changes.set_json("after", "2");
            }
            "texts" => changes.set_texts("many", ["a", "b\"c"]),
            "remove" => changes.remove("act"),
            _ => {}
        }
        Ok(())
    }
}

weir_plugin::export_field_stage!(FieldProbe);
