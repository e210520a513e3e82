//! map: change documents with a jq program from the config (jaq, a jq in
//! Rust), compiled once when the stage starts. A program written in the
//! common part of jq also runs in the stage's own engine (`fast/`), which
//! hands a document to jaq whenever jaq's answer is not certain.
//!
//! Each document goes in as an object of its fields (and its `id`, unless
//! the config names the `fields` it uses) and the one object the program
//! gives back says what the document's fields become: fields that differ
//! are written, fields that are gone are removed. No value drops the
//! document; more than one, or one that is not an object, fails it.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod fast;
mod program;
#[cfg(test)]
mod tests;

use config::Config;
use program::{Ends, Program};
use weir_plugin::{Changes, ConfigIssue, FieldStage, Lent, PluginError, issue};

/// The stage's allocator: a jq program allocates for nearly every value it
/// makes, and talc serves that faster than wasi-libc's dlmalloc.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

struct Map {
    program: Program,
    fields: Vec<String>,
}

impl FieldStage for Map {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = weir_plugin::reserved_field_issues("fields", &config.fields);
        if let Err(why) = Program::compile(&config.jq) {
            issues.push(issue("jq", why));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let program = Program::compile(&config.jq)?;
        let fields = match config.fields {
            // None named: those the program names, if it touches the
            // document only through them; else every field.
            fields if fields.is_empty() => program.fields_used().unwrap_or_default(),
            fields => fields,
        };
        Ok(Self { program, fields })
    }

    fn reads(&self) -> &[String] {
        &self.fields
    }

    fn plan(
        &mut self,
        fields: &[Option<&str>],
        doc: &Lent<'_>,
        changes: &mut Changes<'_>,
    ) -> Result<(), PluginError> {
        let ends = if self.fields.is_empty() {
            // Every field: the names differ from one document to the next.
            let doc = doc.document();
            let names = doc.field_names();
            let answers = doc.get_json_many(&names);
            let values = names.iter().zip(&answers);
            let input = values.filter_map(|(n, a)| Some((n.as_str(), a.as_deref()?)));
            self.program.run(Some(&doc.id()), input)
        } else {
            let values = self.fields.iter().zip(fields);
            let input = values.filter_map(|(n, a)| Some((n.as_str(), (*a)?)));
            self.program.run(None, input)
        }
        .map_err(PluginError::Document)?;
        match ends {
            Ends::Dropped => doc.document().set_dropped(true),
            Ends::Changed(changed) => {
                for (name, json) in &changed {
                    match json {
                        Some(json) => changes.set_json(name, json),
                        None => changes.remove(name),
                    }
                }
            }
        }
        Ok(())
    }
}

weir_plugin::export_field_stage!(Map);
