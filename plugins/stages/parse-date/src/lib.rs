//! parse-date: read dates written in many ways and write them as RFC 3339 in UTC.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, SecondsFormat, TimeZone, Utc};
use config::{Config, Epoch, OnError};
use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, field_pairs, issue, map_values,
};

const DEFAULT_FORMATS: [&str; 4] = [
    "%Y-%m-%d",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%Y/%m/%d",
];

struct ParseDate {
    pairs: Vec<(String, String)>,
    formats: Vec<String>,
    zone: FixedOffset,
    epoch: Epoch,
    on_error: OnError,
}

fn zone(text: Option<&str>) -> Result<FixedOffset, String> {
    let Some(text) = text else {
        return Ok(FixedOffset::east_opt(0).expect("UTC"));
    };
    if text.eq_ignore_ascii_case("utc") || text == "Z" {
        return Ok(FixedOffset::east_opt(0).expect("UTC"));
    }
    DateTime::parse_from_str(
        &format!("2000-01-01T00:00:00{text}"),
        "%Y-%m-%dT%H:%M:%S%:z",
    )
    .map(|d| *d.offset())
    .map_err(|_| format!("`{text}` is not an offset such as `+02:00`, `-05:30` or `UTC`"))
}

impl BatchStage for ParseDate {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = field_pairs(&config.fields, &config.mappings)
            .err()
            .unwrap_or_default();
        if let Err(e) = zone(config.timezone.as_deref()) {
            issues.push(issue("timezone", e));
        }
        for (i, f) in config.formats.iter().enumerate() {
            if chrono::format::StrftimeItems::new(f).any(|item| item == chrono::format::Item::Error)
            {
                issues.push(issue(
                    format!("formats[{i}]"),
                    format!("`{f}` is not a strftime format"),
                ));
            }
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let pairs = field_pairs(&config.fields, &config.mappings).map_err(|_| "invalid fields")?;
        let mut formats = config.formats;
        formats.extend(DEFAULT_FORMATS.iter().map(|f| (*f).to_owned()));
        Ok(Self {
            pairs,
            formats,
            zone: zone(config.timezone.as_deref())?,
            epoch: config.epoch,
            on_error: config.on_error,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(map_values(docs, &self.pairs, |value| {
            let parsed = match value {
                Json::String(s) => self.parse(s.trim()),
                Json::Number(n) => n.as_f64().and_then(|n| self.epoch_date(n)),
                _ => return Ok(None),
            };
            match (parsed, self.on_error) {
                (Some(date), _) => Ok(Some(Json::String(
                    date.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                ))),
                (None, OnError::Keep) => Ok(None),
                (None, OnError::Remove) => Ok(Some(Json::Null)),
                (None, OnError::Fail) => {
                    Err(format!("{value} is not a date in any of the formats"))
                }
            }
        }))
    }
}

impl ParseDate {
    fn parse(&self, text: &str) -> Option<DateTime<Utc>> {
        if let Ok(d) = DateTime::parse_from_rfc3339(text) {
            return Some(d.with_timezone(&Utc));
        }
        if let Ok(d) = DateTime::parse_from_rfc2822(text) {
            return Some(d.with_timezone(&Utc));
        }
        self.formats.iter().find_map(|f| {
            if let Ok(d) = DateTime::parse_from_str(text, f) {
                return Some(d.with_timezone(&Utc));
            }
            let naive = NaiveDateTime::parse_from_str(text, f).ok().or_else(|| {
                NaiveDate::parse_from_str(text, f)
                    .ok()
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
            })?;
            self.zone
                .from_local_datetime(&naive)
                .single()
                .map(|d| d.with_timezone(&Utc))
        })
    }

    fn epoch_date(&self, n: f64) -> Option<DateTime<Utc>> {
        let millis = match self.epoch {
            Epoch::Seconds => n * 1000.0,
            Epoch::Millis => n,
        };
        if !millis.is_finite() || millis.abs() > 8.64e15 {
            return None;
        }
        DateTime::from_timestamp_millis(millis as i64)
    }
}

weir_plugin::export_batch_stage!(ParseDate);
