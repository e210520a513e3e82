//! file-connector: publish one document per file of a folder (`folder.rs`),
//! or one per JSONL line or CSV row of record files (here).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod folder;
mod manifest;
mod stamp;
mod walk;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use config::{Config, Format};
use weir_plugin::outbox::Reason;
use weir_plugin::serde;
use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::{ConfigIssue, Connector, Outbox, PluginError, Publisher, issue, sync};

fn format_of(config: &Config, path: &str) -> Option<Format> {
    config.format.or_else(|| {
        match Path::new(path)
            .extension()?
            .to_str()?
            .to_ascii_lowercase()
            .as_str()
        {
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    })
}

struct FileConnector {
    config: Config,
    /// Record files with `incremental`: the ids read this run.
    seen: std::collections::HashSet<String>,
    /// Records read and not yet published: they go in one call when it is
    /// full and at the end of their file.
    outbox: Outbox,
    /// For each record in `outbox`, in order: what follows its publish.
    waiting: Vec<Waiting>,
}

/// A record in the outbox: its line, and with `incremental` the id and
/// fingerprint kept once it is published.
struct Waiting {
    line: usize,
    keep: Option<(String, String)>,
}

/// A record's fingerprint: the first 128 bits of the SHA-256 of its text.
fn fingerprint(text: &str) -> String {
    stamp::fingerprint(text.trim_end().as_bytes())
}

fn fatal(path: &str, line: usize, message: impl std::fmt::Display) -> PluginError {
    PluginError::Fatal(format!("{path}:{line}: {message}"))
}

/// Finds the string or number value of one top-level key without building
/// the object: values of other keys are skipped, not allocated.
struct FindKey<'k>(&'k str);

impl<'de> serde::de::DeserializeSeed<'de> for FindKey<'_> {
    type Value = Option<String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FindKey<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if found.is_none() && key == self.0 {
                found = match map.next_value::<Json>()? {
                    Json::String(s) if !s.is_empty() => Some(s),
                    Json::Number(n) => Some(n.to_string()),
                    _ => None,
                };
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The id of a line that begins `{"<id field>": "<string without escapes>"`
/// (`id_key` is the field name quoted), read without scanning the rest: the
/// usual shape of JSONL exports. `None` for any other shape, which is then
/// read in full. Like [`FindKey`], the first occurrence of the key wins.
fn leading_id<'a>(line: &'a str, id_key: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix(id_key)?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find(['"', '\\'])?;
    (rest.as_bytes()[end] == b'"' && end > 0).then(|| &rest[..end])
}

impl FileConnector {
    fn fallback_id(path: &str, line: usize) -> String {
        let name = Path::new(path)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(path);
        format!("{name}-{line}")
    }

    fn incremental(&self) -> bool {
        self.config.incremental.unwrap_or(false)
    }

    /// The file a record names in `file_field` (a manifest), when it is
    /// followed: `record` is the record's fields.
    fn listed(&self, record: &Map<String, Json>) -> Option<String> {
        let field = self.config.file_field.as_deref()?;
        match record.get(field) {
            Some(Json::String(path)) if !path.is_empty() && self.incremental() => {
                Some(path.clone())
            }
            _ => None,
        }
    }

    /// Publish the JSON object `fields` under the id found in it (or the fallback).
    /// With `incremental`, only when the record is new or changed (or the
    /// file it lists, `listed`, is), and its fingerprint is kept after it.
    fn publish(
        &mut self,
        publisher: &Publisher,
        at: (&str, usize),
        id: Option<String>,
        fields: &str,
        listed: Option<String>,
    ) -> Result<(), PluginError> {
        let (path, line) = at;
        let id = id.unwrap_or_else(|| Self::fallback_id(path, line));
        let id = format!("{}{id}", self.config.id_prefix);
        let mut keep = None;
        if self.incremental() {
            self.seen.insert(id.clone());
            let print = fingerprint(fields);
            let before = sync::get(&id);
            let full = sync::full_sync();
            match listed {
                None if !full && before.as_deref() == Some(print.as_str()) => return Ok(()),
                None => keep = Some(print),
                Some(file) => match manifest::check(&print, before.as_deref(), &file, full) {
                    manifest::Listed::Unchanged => return Ok(()),
                    manifest::Listed::Touched(value) => return sync::set(&id, &value),
                    manifest::Listed::Changed(value) => keep = Some(value),
                    // Sent as listed, not kept: tried again next run.
                    manifest::Listed::Unreadable => {}
                },
            }
        }
        let keep = keep.map(|value| (id.clone(), value));
        self.outbox.push(&id, fields);
        self.waiting.push(Waiting { line, keep });
        if self.outbox.is_full() {
            self.send(publisher, path)?;
        }
        Ok(())
    }

    /// Publish the records of `path` in the outbox, then keep the
    /// fingerprints of those published (a state change waits for its
    /// record's publish). Until then a later record of the same id is
    /// compared with the state of earlier runs, so it may be sent again:
    /// at least once, the index keeps the last.
    fn send(&mut self, publisher: &Publisher, path: &str) -> Result<(), PluginError> {
        let sent = self.outbox.send(publisher);
        let published = match &sent {
            Ok(()) => self.waiting.len(),
            Err(refusal) => refusal.at.min(self.waiting.len()),
        };
        let mut waiting = std::mem::take(&mut self.waiting);
        for Waiting { keep, .. } in waiting.drain(..published) {
            if let Some((id, value)) = keep {
                sync::set(&id, &value)?;
            }
        }
        let refused = sent.map_err(|refusal| {
            let line = waiting.first().map_or(0, |w| w.line);
            match refusal.reason {
                Reason::Invalid(e) => fatal(path, line, weir_plugin::field_error_message(&e)),
                Reason::Refused(why) => fatal(path, line, format!("publish refused: {why}")),
            }
        });
        waiting.clear();
        self.waiting = waiting;
        refused
    }

    /// With `incremental`: a delete for every id kept from an earlier run
    /// that no file holds now.
    fn delete_gone(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let gone = sync::delete_unseen(publisher, &self.seen, str::to_owned)?;
        if gone > 0 {
            weir_plugin::info!("{gone} records are gone since the last run");
        }
        Ok(())
    }

    /// Publish the records of a JSONL file: those read before a line that
    /// stops it too.
    fn read_jsonl(&mut self, publisher: &Publisher, path: &str) -> Result<(), PluginError> {
        let read = self.read_jsonl_lines(publisher, path);
        let sent = self.send(publisher, path);
        read.and(sent)
    }

    fn read_jsonl_lines(&mut self, publisher: &Publisher, path: &str) -> Result<(), PluginError> {
        let file = File::open(path).map_err(|e| fatal(path, 0, e))?;
        // Large reads: each one is a host call (and a thread hop) in the sandbox.
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut line = String::new();
        let id_key = format!("\"{}\"", self.config.id_field);
        for line_no in 1.. {
            line.clear();
            if reader
                .read_line(&mut line)
                .map_err(|e| fatal(path, line_no, e))?
                == 0
            {
                break;
            }
            if line.trim().is_empty() {
                continue;
            }
            // Only the id is read here; the host parses the whole line once
            // (and says where it is broken, if it is).
            if self.config.file_field.is_some() && self.incremental() {
                // A manifest: the whole record, for the file it lists.
                let record: Map<String, Json> = serde_json::from_str(&line).map_err(|e| {
                    fatal(
                        path,
                        line_no,
                        format!("a line must be one JSON object: {e}"),
                    )
                })?;
                let id = match record.get(&self.config.id_field) {
                    Some(Json::String(s)) if !s.is_empty() => Some(s.clone()),
                    Some(Json::Number(n)) => Some(n.to_string()),
                    _ => None,
                };
                let listed = self.listed(&record);
                self.publish(publisher, (path, line_no), id, &line, listed)?;
                continue;
            }
            if let Some(id) = leading_id(&line, &id_key) {
                self.publish(publisher, (path, line_no), Some(id.to_owned()), &line, None)?;
                continue;
            }
            let mut de = serde_json::Deserializer::from_str(&line);
            let id =
                serde::de::DeserializeSeed::deserialize(FindKey(&self.config.id_field), &mut de)
                    .and_then(|id| de.end().map(|()| id))
                    .map_err(|e| {
                        fatal(
                            path,
                            line_no,
                            format!("a line must be one JSON object: {e}"),
                        )
                    })?;
            self.publish(publisher, (path, line_no), id, &line, None)?;
        }
        Ok(())
    }

    /// Publish the rows of a CSV file: those read before a row that stops
    /// it too.
    fn read_csv(&mut self, publisher: &Publisher, path: &str) -> Result<(), PluginError> {
        let read = self.read_csv_rows(publisher, path);
        let sent = self.send(publisher, path);
        read.and(sent)
    }

    fn read_csv_rows(&mut self, publisher: &Publisher, path: &str) -> Result<(), PluginError> {
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(self.config.delimiter as u8)
            .from_path(path)
            .map_err(|e| fatal(path, 0, e))?;
        let headers = reader.headers().map_err(|e| fatal(path, 1, e))?.clone();
        for (i, record) in reader.records().enumerate() {
            let line_no = i + 2;
            let record = record.map_err(|e| fatal(path, line_no, e))?;
            let fields: Map<String, Json> = headers
                .iter()
                .zip(record.iter())
                .map(|(h, v)| (h.to_owned(), Json::String(v.to_owned())))
                .collect();
            let id = match fields.get(&self.config.id_field) {
                Some(Json::String(s)) if !s.is_empty() => Some(s.clone()),
                _ => None,
            };
            let listed = self.listed(&fields);
            self.publish(
                publisher,
                (path, line_no),
                id,
                &Json::Object(fields).to_string(),
                listed,
            )?;
        }
        Ok(())
    }
}

impl Connector for FileConnector {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.paths.is_empty() {
            issues.push(issue("paths", "needs at least one folder or file"));
        }
        for (setting, globs) in [("include", &config.include), ("exclude", &config.exclude)] {
            for (i, pattern) in globs.iter().enumerate() {
                if let Err(e) = walk::glob(pattern) {
                    issues.push(issue(format!("{setting}[{i}]"), e.to_string()));
                }
            }
        }
        if config.max_depth == Some(0) {
            issues.push(issue("max_depth", "must be at least 1"));
        }
        if !(1..=1024).contains(&config.max_file_mib) {
            issues.push(issue("max_file_mib", "must be 1 to 1,024"));
        }
        if config.content_field.is_empty() {
            issues.push(issue("content_field", "must name a field"));
        }
        issues.extend(weir_plugin::reserved_field_issues(
            "content_field",
            std::slice::from_ref(&config.content_field),
        ));
        match config.file_field.as_deref() {
            Some("") => issues.push(issue("file_field", "must name a field")),
            Some(_) if config.incremental != Some(true) => issues.push(issue(
                "file_field",
                "follows listed files for `incremental = true` only: set it",
            )),
            _ => {}
        }
        if !config.delimiter.is_ascii() {
            issues.push(issue("delimiter", "must be a single ASCII character"));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self {
            config,
            seen: Default::default(),
            outbox: Outbox::new(),
            waiting: Vec::new(),
        })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let (folders, files) = self.sort_paths()?;
        if !folders.is_empty() {
            return folder::FolderSync::new(&self.config)?.run(publisher, &folders);
        }
        for (path, format) in files {
            weir_plugin::info!("reading {path}");
            match format {
                Format::Jsonl => self.read_jsonl(publisher, &path)?,
                Format::Csv => self.read_csv(publisher, &path)?,
            }
        }
        if self.incremental() {
            self.delete_gone(publisher)?;
        }
        Ok(())
    }
}

impl FileConnector {
    /// `paths` as folders or as record files and their formats: one kind
    /// only, each path there.
    #[allow(clippy::type_complexity)]
    fn sort_paths(&self) -> Result<(Vec<String>, Vec<(String, Format)>), PluginError> {
        let (mut folders, mut files) = (Vec::new(), Vec::new());
        for path in &self.config.paths {
            let meta = std::fs::metadata(path).map_err(|e| {
                fatal(
                    path,
                    0,
                    format!("cannot read it (is its folder granted to the plugin?): {e}"),
                )
            })?;
            if meta.is_dir() {
                folders.push(path.clone());
                continue;
            }
            match format_of(&self.config, path) {
                Some(format) => files.push((path.clone(), format)),
                None => {
                    return Err(fatal(
                        path,
                        0,
                        "not a folder, and its format cannot be told: use .jsonl or .csv, or set `format`",
                    ));
                }
            }
        }
        if !folders.is_empty() && !files.is_empty() {
            return Err(PluginError::Fatal(format!(
                "`paths` names folders ({}) and record files ({}): one connector reads one kind; use two connectors",
                folders.join(", "),
                files
                    .iter()
                    .map(|(p, _)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok((folders, files))
    }
}

weir_plugin::export_connector!(FileConnector);
