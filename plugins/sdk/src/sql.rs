//! Queries against the databases a connector's config grants (contract
//! 0.2.2, `grants.sql`): the host holds the connection; the plugin names
//! the database and reads the rows a page at a time.
//!
//! ```ignore
//! let rows = weir_plugin::sql::query("main", "SELECT id, title FROM books WHERE id > $1", &[SqlValue::Integer(0)])?;
//! while let page = rows.next(1000)? && !page.is_empty() { ... }
//! ```

use crate::PluginError;
use crate::bindings::connector::weir::plugin::sql as host;
pub use crate::bindings::connector::weir::plugin::sql::{Column, Rows, SqlValue};

/// Run `statement` against granted database `database` with `params`
/// (`$1`, `$2`, ...). A refusal (not granted, bad SQL, the server's error)
/// is a fatal error naming why.
pub fn query(database: &str, statement: &str, params: &[SqlValue]) -> Result<Rows, PluginError> {
    host::query(database, statement, params).map_err(PluginError::Fatal)
}

/// Every row of `rows`, `page` at a time, handed to `each` in order.
pub fn for_each_row(
    rows: &Rows,
    page: u32,
    mut each: impl FnMut(Vec<SqlValue>) -> Result<(), PluginError>,
) -> Result<(), PluginError> {
    loop {
        let batch = rows.next(page).map_err(PluginError::Fatal)?;
        if batch.is_empty() {
            return Ok(());
        }
        for row in batch {
            each(row)?;
        }
    }
}

/// A value as JSON: numbers, booleans, text, parsed JSON, bytes in base64
/// (as text), null.
pub fn to_json(value: &SqlValue) -> serde_json::Value {
    use serde_json::Value as Json;
    match value {
        SqlValue::Null => Json::Null,
        SqlValue::Boolean(b) => Json::Bool(*b),
        SqlValue::Integer(i) => Json::from(*i),
        SqlValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        SqlValue::Text(t) => Json::String(t.clone()),
        SqlValue::Json(t) => serde_json::from_str(t).unwrap_or_else(|_| Json::String(t.clone())),
        SqlValue::Bytes(b) => Json::String(base64_of(b)),
    }
}

/// A value as text: what a key, an id or a cursor holds (none for null).
pub fn to_text(value: &SqlValue) -> Option<String> {
    match value {
        SqlValue::Null => None,
        SqlValue::Boolean(b) => Some(b.to_string()),
        SqlValue::Integer(i) => Some(i.to_string()),
        SqlValue::Float(f) => Some(f.to_string()),
        SqlValue::Text(t) | SqlValue::Json(t) => Some(t.clone()),
        SqlValue::Bytes(b) => Some(base64_of(b)),
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
