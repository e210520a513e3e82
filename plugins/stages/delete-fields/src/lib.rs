//! delete-fields: remove fields by name or by a pattern on their names, or every field but some.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use regex::{Regex, RegexBuilder};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document, reserved_field_issues,
};

fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
}

struct DeleteFields {
    fields: Vec<FieldChange>,
    matching: Option<Regex>,
    keep: Option<Vec<String>>,
}

impl BatchStage for DeleteFields {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = reserved_field_issues("fields", &config.fields);
        if config.keep.is_some() && (!config.fields.is_empty() || config.matching.is_some()) {
            issues.push(issue(
                "keep",
                "says which fields stay: it cannot be combined with `fields` or `matching`",
            ));
        }
        if config.fields.is_empty() && config.matching.is_none() && config.keep.is_none() {
            issues.push(issue(
                "fields",
                "needs fields to delete, a `matching` pattern, or `keep`",
            ));
        }
        if let Some(p) = &config.matching
            && let Err(e) = compile(p)
        {
            issues.push(issue("matching", e.to_string()));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self {
            fields: config
                .fields
                .iter()
                .map(|f| FieldChange::remove(f.as_str()))
                .collect(),
            matching: config
                .matching
                .as_deref()
                .map(compile)
                .transpose()
                .map_err(|e| e.to_string())?,
            keep: config.keep,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| {
            let mut changes = self.fields.clone();
            if self.matching.is_some() || self.keep.is_some() {
                for name in doc.field_names() {
                    let goes = match (&self.matching, &self.keep) {
                        (_, Some(keep)) => !keep.contains(&name),
                        (Some(regex), None) => regex.is_match(&name),
                        (None, None) => false,
                    };
                    if goes {
                        changes.push(FieldChange::remove(name));
                    }
                }
            }
            doc.update(&changes).map_err(doc_error)
        }))
    }
}

weir_plugin::export_batch_stage!(DeleteFields);
