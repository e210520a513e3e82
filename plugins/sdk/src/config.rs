//! A plugin's settings: parsing them with the offending setting named
//! ([`parse_config`]), the plugin's own checks and their issues, the fields
//! no setting may name ([`RESERVED_FIELDS`]), the setting shapes several
//! stages share ([`FieldMapping`], [`Mode`]), and files a stage loads at
//! `start` ([`read_text_file`]).

use serde::de::DeserializeOwned;

use crate::{ConfigIssue, PluginError, UpdateMode};

/// Parse a plugin config, naming the offending setting on error.
pub fn parse_config<C: DeserializeOwned>(config: &str) -> Result<C, ConfigIssue> {
    let mut de = serde_json::Deserializer::from_str(config);
    serde_path_to_error::deserialize(&mut de).map_err(|e| ConfigIssue {
        path: match e.path().to_string() {
            p if p == "." => String::new(),
            p => p,
        },
        message: without_position(e.inner()),
    })
}

/// What is wrong, without serde_json's "at line 1 column 9": the config
/// reaches the plugin as JSON the host made, so a place in it means
/// nothing to whoever wrote the TOML (the host names the setting instead).
fn without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match message.strip_suffix(&suffix) {
        Some(bare) if error.line() > 0 => bare.to_owned(),
        _ => message,
    }
}

/// Every issue in `config`: parse errors, then the plugin's own checks.
pub fn check_config<C: DeserializeOwned>(
    config: &str,
    check: fn(&C) -> Vec<ConfigIssue>,
) -> Vec<ConfigIssue> {
    match parse_config::<C>(config) {
        Ok(parsed) => check(&parsed),
        Err(issue) => vec![issue],
    }
}

/// A config issue at `path`.
pub fn issue(path: impl Into<String>, message: impl Into<String>) -> ConfigIssue {
    ConfigIssue {
        path: path.into(),
        message: message.into(),
    }
}

/// Fields the host keeps for itself: a stage cannot set or delete them.
pub const RESERVED_FIELDS: [&str; 4] = ["id", "run_id", "_children", DELETED_FIELD];

/// What an indexer picks (`BatchFormat::pick`) to be told deletion markers
/// (see [`crate::sync::delete`]): `["true"]` for a marker, nothing otherwise. The
/// host never sends markers to an indexer that does not pick it.
pub const DELETED_FIELD: &str = "_deleted";

/// Issues for the reserved fields (`RESERVED_FIELDS`) among the field
/// names a setting lists as fields to write or delete: caught at
/// validation, not by failing every document.
pub fn reserved_field_issues(setting: &str, fields: &[String]) -> Vec<ConfigIssue> {
    fields
        .iter()
        .enumerate()
        .filter(|(_, field)| RESERVED_FIELDS.contains(&field.as_str()))
        .map(|(i, field)| {
            issue(
                format!("{setting}[{i}]"),
                format!("`{field}` is kept by the host: a stage cannot change it"),
            )
        })
        .collect()
}
/// The parsed config, or a fatal error listing every problem (parse error,
/// or the plugin's own checks): what `start` and `pre-execute` refuse.
#[doc(hidden)]
pub fn __checked_config<C: DeserializeOwned>(
    config: &str,
    check: fn(&C) -> Vec<ConfigIssue>,
) -> Result<C, PluginError> {
    let describe = |issues: &[ConfigIssue]| {
        issues
            .iter()
            .map(|i| {
                format!(
                    "{}: {}",
                    if i.path.is_empty() {
                        "(config)"
                    } else {
                        &i.path
                    },
                    i.message
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let parsed = parse_config::<C>(config)
        .map_err(|i| PluginError::Fatal(format!("invalid config: {}", describe(&[i]))))?;
    match check(&parsed) {
        issues if issues.is_empty() => Ok(parsed),
        issues => Err(PluginError::Fatal(format!(
            "invalid config: {}",
            describe(&issues)
        ))),
    }
}
/// A `{ source = "...", target = "..." }` pair: the shape of the `mappings`
/// setting of stages that move values from one field to another.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldMapping {
    /// The field values are read from.
    pub source: String,
    /// The field the results are written to.
    pub target: String,
}

/// How a stage writes to a field that may already have values; the `mode`
/// setting of several stages (`"overwrite"`, `"append"`, `"skip"`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Replace existing values.
    #[default]
    Overwrite,
    /// Add to existing values (the field becomes multi-valued).
    Append,
    /// Leave a field that already exists untouched.
    Skip,
}

impl From<Mode> for UpdateMode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Overwrite => UpdateMode::Overwrite,
            Mode::Append => UpdateMode::Append,
            Mode::Skip => UpdateMode::Skip,
        }
    }
}
/// The text of the file at `path` (in a folder granted to the plugin), read
/// as UTF-8, of at most `max_mib` MiB: a dictionary or a list a stage loads
/// at `start`. `what` names it in errors ("dictionary", "terms file").
pub fn read_text_file(what: &str, path: &str, max_mib: u64) -> Result<String, String> {
    use std::io::Read;
    let limit = max_mib << 20;
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(|e| format!("cannot open {what} `{path}`: {e}"))?
        .take(limit + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {what} `{path}` as UTF-8 text: {e}"))?;
    if text.len() as u64 > limit {
        return Err(format!(
            "{what} `{path}` is larger than max_file_mib ({max_mib} MiB)"
        ));
    }
    Ok(text)
}
