//! The reference as Markdown: a section per plugin, its description, a table
//! of its settings (type, default, meaning), a table per kind of entry its
//! lists and tables hold, and the example from its `weir test` transcript.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value as Json};

use crate::Bundled;

const HEADER: &str = "# Plugin reference

Every bundled plugin and its settings. **Generated** from each plugin's own
`src/config.rs`, the `Config` type it parses (its doc comments and serde
attributes, through `schemars`), by `plugins/reference/`; do not edit by hand:

```sh
cargo run --manifest-path plugins/Cargo.toml -p plugin-reference -- --write docs/plugin-reference.md
```

The tests fail when this file and the code disagree. An example is a plugin's
`weir test` transcript (`test/` in its folder): the config below, run on
`test/input.jsonl`, must give `test/expected.jsonl`, and the tests check it.
Any stage also takes `when` ([configuration.md](configuration.md#stage-conditions)),
and every plugin its `grants` and limits, which the host reads, not the plugin.
";

/// The whole reference for `plugins`, whose folders are under `root`.
pub fn reference(plugins: &[Bundled], root: &Path) -> Result<String, String> {
    let mut out = String::from(HEADER);
    for kind in ["stage", "connector", "indexer"] {
        let names: Vec<String> = plugins
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| format!("[`{0}`](#{0})", p.name))
            .collect();
        let _ = writeln!(out, "\n**{kind}s:** {}", names.join(", "));
    }
    for plugin in plugins {
        out.push('\n');
        section(&mut out, plugin, root)?;
    }
    Ok(out)
}

fn section(out: &mut String, plugin: &Bundled, root: &Path) -> Result<(), String> {
    let schema = plugin.schema.as_value();
    let defs = schema.get("$defs").and_then(Json::as_object);
    let _ = writeln!(out, "## {}\n", plugin.name);
    let _ = writeln!(
        out,
        "{} {} ([`plugins/{}`](../plugins/{})).\n",
        if plugin.kind == "indexer" { "An" } else { "A" },
        plugin.kind,
        plugin.dir,
        plugin.dir
    );
    let description = schema
        .get("description")
        .and_then(Json::as_str)
        .ok_or_else(|| {
            format!(
                "{}: its Config has no doc comment to describe it",
                plugin.name
            )
        })?;
    let _ = writeln!(out, "{}\n", prose(description));
    let mut nested = BTreeSet::new();
    settings(out, plugin.name, schema, defs, &mut nested)?;
    let mut done = BTreeSet::new();
    while let Some(name) = nested.pop_first() {
        if !done.insert(name.clone()) {
            continue;
        }
        let def = defs
            .and_then(|d| d.get(&name))
            .ok_or(format!("no $defs entry {name}"))?;
        let _ = writeln!(out, "\n`{name}`: {}\n", cell(text(def, "description")));
        settings(out, plugin.name, def, defs, &mut nested)?;
    }
    let transcript = root.join(plugin.dir).join("test");
    if let Ok(config) = std::fs::read_to_string(transcript.join("config.toml")) {
        let _ = writeln!(
            out,
            "\nExample, from its transcript ([`test/`](../plugins/{}/test/)):\n\n```toml\n{}```",
            plugin.dir, config
        );
    }
    Ok(())
}

/// The settings table of an object schema; the objects its settings hold
/// are added to `nested`.
fn settings(
    out: &mut String,
    plugin: &str,
    schema: &Json,
    defs: Option<&Map<String, Json>>,
    nested: &mut BTreeSet<String>,
) -> Result<(), String> {
    let Some(properties) = schema.get("properties").and_then(Json::as_object) else {
        out.push_str("No settings.\n");
        return Ok(());
    };
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| r.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    out.push_str("| setting | type | default | what it does |\n| --- | --- | --- | --- |\n");
    for (name, property) in properties {
        let description = text(property, "description");
        if description.is_empty() {
            return Err(format!("{plugin}: setting `{name}` has no doc comment"));
        }
        let default = match property.get("default") {
            _ if required.contains(name.as_str()) => "**required**".to_owned(),
            Some(value) => format!("`{value}`").replace('|', "\\|"),
            None if property.get("type").and_then(Json::as_str) == Some("array") => {
                "`[]`".to_owned()
            }
            None => "unset".to_owned(),
        };
        let (kind, values) = type_of(property, defs, nested);
        let mut what = cell(description);
        if !values.is_empty() {
            let _ = write!(what, " {values}");
        }
        let _ = writeln!(out, "| `{name}` | {kind} | {default} | {what} |");
    }
    Ok(())
}

/// A schema's type in words, and what its named values mean (for an enum
/// whose variants are documented).
fn type_of(
    schema: &Json,
    defs: Option<&Map<String, Json>>,
    nested: &mut BTreeSet<String>,
) -> (String, String) {
    if let Some(reference) = schema.get("$ref").and_then(Json::as_str) {
        let name = reference.rsplit('/').next().unwrap_or(reference).to_owned();
        let def = defs.and_then(|d| d.get(&name)).unwrap_or(&Json::Null);
        if def.get("properties").is_some() {
            let kind = format!("`{name}` table");
            nested.insert(name);
            return (kind, String::new());
        }
        return type_of(def, defs, nested);
    }
    if let Some(values) = schema.get("enum").and_then(Json::as_array) {
        let words: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        return (words.join(" \\| "), String::new());
    }
    if let Some(value) = schema.get("const") {
        return (format!("`{value}`"), String::new());
    }
    let variants = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Json::as_array);
    if let Some(variants) = variants {
        let mut kinds = Vec::new();
        let mut meanings = Vec::new();
        for variant in variants {
            if variant.get("type").and_then(Json::as_str) == Some("null") {
                continue;
            }
            let (kind, _) = type_of(variant, defs, nested);
            let description = text(variant, "description");
            if variant.get("const").is_some() && !description.is_empty() {
                let meaning = cell(description);
                meanings.push(format!("{kind}: {}", meaning.trim_end_matches('.')));
            }
            kinds.push(kind);
        }
        let meanings = if meanings.is_empty() {
            String::new()
        } else {
            meanings.join("; ") + "."
        };
        return (kinds.join(" \\| "), meanings);
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts
            .iter()
            .filter_map(Json::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => return ("any value".to_owned(), String::new()),
    };
    let words: Vec<String> = types
        .iter()
        .map(|t| match *t {
            "string" => "text".to_owned(),
            "integer" if schema.get("minimum").and_then(Json::as_f64) == Some(0.0) => {
                "integer ≥ 0".to_owned()
            }
            "array" => {
                let items = schema.get("items").unwrap_or(&Json::Null);
                format!("list of {}", grouped(type_of(items, defs, nested).0))
            }
            "object" => match schema.get("additionalProperties") {
                Some(values @ Json::Object(_)) => {
                    format!("table of {}", grouped(type_of(values, defs, nested).0))
                }
                _ => "table".to_owned(),
            },
            other => other.to_owned(),
        })
        .collect();
    (words.join(" or "), String::new())
}

/// A type of several choices in parentheses, when it is part of another.
fn grouped(kind: String) -> String {
    if kind.contains(" \\| ") || kind.contains(" or ") {
        format!("({kind})")
    } else {
        kind
    }
}

fn text<'a>(schema: &'a Json, key: &str) -> &'a str {
    schema.get(key).and_then(Json::as_str).unwrap_or("")
}

/// Doc comment text as Markdown paragraphs (a doc comment's lines joined).
fn prose(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            if paragraph.starts_with("```") || paragraph.starts_with("- ") {
                paragraph.to_owned()
            } else {
                paragraph
                    .lines()
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Doc comment text for one table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
