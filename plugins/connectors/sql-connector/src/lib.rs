//! sql-connector: publish one document per row of a SQL query, keeping an
//! index in step with a table (a cursor of changed rows, deletes).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::collections::HashSet;

use config::Config;
use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::sql::{self, SqlValue};
use weir_plugin::{
    ConfigIssue, Connector, Document, PluginError, Publisher, RESERVED_FIELDS, issue, sync,
};

/// The state key of the cursor; ids kept for `keys_query` are `id:<id>`.
const CURSOR: &str = "cursor";
const ID_KEY: &str = "id:";

struct Sql {
    config: Config,
}

fn fatal(message: impl Into<String>) -> PluginError {
    PluginError::Fatal(message.into())
}

impl Sql {
    /// The cursor of the last run, else `cursor_start` (a full sync starts
    /// there too).
    fn cursor(&self) -> Result<Vec<String>, PluginError> {
        if self.config.cursor_columns.is_empty() {
            return Ok(Vec::new());
        }
        match sync::get(CURSOR).filter(|_| !sync::full_sync()) {
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                fatal(format!(
                    "the kept cursor `{text}` is not a list of texts: {e}"
                ))
            }),
            None => Ok(self.config.cursor_start.clone()),
        }
    }

    fn column(columns: &[sql::Column], name: &str, setting: &str) -> Result<usize, PluginError> {
        columns.iter().position(|c| c.name == name).ok_or_else(|| {
            let all: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            fatal(format!(
                "{setting} `{name}` is not a column of the query's rows ({})",
                all.join(", ")
            ))
        })
    }

    fn send_rows(&self, publisher: &Publisher) -> Result<(), PluginError> {
        let c = &self.config;
        let params: Vec<SqlValue> = self.cursor()?.into_iter().map(SqlValue::Text).collect();
        let rows = sql::query(&c.database, &c.query, &params)?;
        let columns = rows.columns();
        let id_at = Self::column(&columns, &c.id_column, "id_column")?;
        let cursor_at = c
            .cursor_columns
            .iter()
            .map(|name| Self::column(&columns, name, "cursor_columns"))
            .collect::<Result<Vec<_>, _>>()?;
        let deleted_at = match &c.deleted_column {
            Some(name) => Some(Self::column(&columns, name, "deleted_column")?),
            None => None,
        };
        let keep_ids = c.keys_query.is_some();
        sql::for_each_row(&rows, c.page_size, |row| {
            let id = sql::to_text(&row[id_at]).ok_or_else(|| {
                fatal(format!(
                    "a row's `{}` is null: it cannot be an id",
                    c.id_column
                ))
            })?;
            let id = format!("{}{id}", c.id_prefix);
            let deleted = deleted_at
                .is_some_and(|at| !matches!(row[at], SqlValue::Null | SqlValue::Boolean(false)));
            if deleted {
                sync::delete(publisher, &id)?;
                if keep_ids {
                    sync::remove(&format!("{ID_KEY}{id}"))?;
                }
            } else {
                let mut fields = Map::new();
                for (column, value) in columns.iter().zip(&row) {
                    if !matches!(value, SqlValue::Null)
                        && !RESERVED_FIELDS.contains(&column.name.as_str())
                    {
                        fields.insert(column.name.clone(), sql::to_json(value));
                    }
                }
                let doc = Document::from_json_with_id(&id, &Json::Object(fields).to_string())
                    .map_err(|e| {
                        fatal(format!(
                            "row `{id}`: {}",
                            weir_plugin::field_error_message(&e)
                        ))
                    })?;
                publisher
                    .publish(doc)
                    .map_err(|e| fatal(format!("publish refused: {e}")))?;
                if keep_ids {
                    sync::set(&format!("{ID_KEY}{id}"), "")?;
                }
            }
            if !cursor_at.is_empty() {
                let cursor: Vec<String> = cursor_at
                    .iter()
                    .map(|&at| sql::to_text(&row[at]).unwrap_or_default())
                    .collect();
                sync::set(CURSOR, &Json::from(cursor).to_string())?;
            }
            Ok(())
        })
    }

    /// With `keys_query`: a delete for every id sent before that the table
    /// no longer holds.
    fn delete_gone(&self, publisher: &Publisher) -> Result<(), PluginError> {
        let Some(keys_query) = &self.config.keys_query else {
            return Ok(());
        };
        let rows = sql::query(&self.config.database, keys_query, &[])?;
        let columns = rows.columns();
        let id_at = Self::column(
            &columns,
            &self.config.id_column,
            "id_column (in keys_query)",
        )?;
        let mut present = HashSet::new();
        sql::for_each_row(&rows, 10_000, |row| {
            if let Some(id) = sql::to_text(&row[id_at]) {
                present.insert(format!("{}{id}", self.config.id_prefix));
            }
            Ok(())
        })?;
        drop(rows);
        let gone: Vec<String> = sync::entries()
            .filter_map(|(key, _)| key.strip_prefix(ID_KEY).map(str::to_owned))
            .filter(|id| !present.contains(id))
            .collect();
        if !gone.is_empty() {
            weir_plugin::info!("{} rows are gone since the last run", gone.len());
        }
        for id in gone {
            sync::delete(publisher, &id)?;
            sync::remove(&format!("{ID_KEY}{id}"))?;
        }
        Ok(())
    }
}

impl Connector for Sql {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.database.is_empty() {
            issues.push(issue("database", "must name a database of grants.sql"));
        }
        if config.query.trim().is_empty() {
            issues.push(issue("query", "must be a SQL query"));
        }
        if config.id_column.is_empty() {
            issues.push(issue("id_column", "must name a column"));
        }
        if !config.cursor_start.is_empty()
            && config.cursor_start.len() != config.cursor_columns.len()
        {
            issues.push(issue(
                "cursor_start",
                format!(
                    "gives {} values for {} cursor columns",
                    config.cursor_start.len(),
                    config.cursor_columns.len()
                ),
            ));
        }
        if !config.cursor_columns.is_empty() && config.cursor_start.is_empty() {
            issues.push(issue(
                "cursor_start",
                "the first run needs a value per cursor column (e.g. [\"-infinity\", \"0\"])",
            ));
        }
        if config
            .keys_query
            .as_deref()
            .is_some_and(|q| q.trim().is_empty())
        {
            issues.push(issue("keys_query", "must be a SQL query"));
        }
        if !(1..=10_000).contains(&config.page_size) {
            issues.push(issue("page_size", "must be 1 to 10,000"));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Self { config })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        self.send_rows(publisher)?;
        self.delete_gone(publisher)
    }
}

weir_plugin::export_connector!(Sql);
