//! A query's rows as the host reads them: sized by the server before they
//! are sent, typed by their column, and counted by what the host holds.
//!
//! The cursor is declared over the plugin's statement wrapped so that each
//! row comes with its size as text (`octet_length` of the row's text form),
//! and with its values only when that size is within [`MAX_PAGE_BYTES`]:
//! a row too large for any page arrives as its size alone, so the host
//! never takes in more than a page's worth to learn that it is too much.
//! The cursor scrolls, so a page refused for its size is put back
//! (`MOVE ABSOLUTE` to the last row handed over): asking for fewer rows
//! then reads the same rows, none lost.

use futures_util::StreamExt;
use tokio_postgres::SimpleQueryMessage;
use tokio_postgres::types::{ToSql, Type};

use super::connection::Connection;
use crate::plugin::bindings::syncing_connector::weir::plugin::sql::SqlValue;

/// Most rows one `next` hands over.
pub(super) const MAX_PAGE_ROWS: u32 = 10_000;
/// Most bytes one page of rows may take in the host (values and their
/// bookkeeping); a single row's text is bounded by it too.
pub(super) const MAX_PAGE_BYTES: usize = 64 << 20;

/// `DECLARE` for `statement`'s rows through `cursor`: column 0 is the
/// row's size as text (as it will arrive: converted to UTF-8 when
/// `convert`), then the statement's own columns (null when the row is
/// over [`MAX_PAGE_BYTES`]). The statement is a subquery here; the
/// line breaks keep a trailing `--` comment from swallowing the rest, and
/// `OFFSET 0` keeps the planner from pulling it up, which would compute
/// its columns once for each reference to the row.
pub(super) fn declare(cursor: &str, statement: &str, convert: bool) -> String {
    let statement = statement.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    let text = if convert {
        "convert_to(weir_q::text, 'UTF8')"
    } else {
        "weir_q::text"
    };
    format!(
        "DECLARE {cursor} SCROLL CURSOR FOR SELECT weir_size.bytes, weir_row.* \
         FROM (SELECT * FROM (\n{statement}\n) AS weir_s OFFSET 0) AS weir_q \
         CROSS JOIN LATERAL (SELECT octet_length({text})::int8 AS bytes) AS weir_size \
         LEFT JOIN LATERAL (SELECT (weir_q).* WHERE weir_size.bytes <= {MAX_PAGE_BYTES}) AS weir_row ON true"
    )
}

/// A null parameter, sent as text.
static NULL: Option<&str> = None;

/// The parameter's type and value, as the statement receives it.
pub(super) fn param(value: &SqlValue) -> (Type, &(dyn ToSql + Sync)) {
    match value {
        SqlValue::Null => (Type::TEXT, &NULL),
        SqlValue::Boolean(b) => (Type::BOOL, b),
        SqlValue::Integer(i) => (Type::INT8, i),
        SqlValue::Float(f) => (Type::FLOAT8, f),
        SqlValue::Text(t) | SqlValue::Json(t) => (Type::TEXT, t),
        SqlValue::Bytes(b) => (Type::BYTEA, b),
    }
}

/// Bytes a parameter sends.
pub(super) fn param_bytes(value: &SqlValue) -> usize {
    match value {
        SqlValue::Text(t) | SqlValue::Json(t) => t.len(),
        SqlValue::Bytes(b) => b.len(),
        _ => 8,
    }
}

/// A value the server sent as text, typed by its column.
pub(super) fn value(text: Option<&str>, ty: &Type) -> SqlValue {
    let Some(text) = text else {
        return SqlValue::Null;
    };
    let typed = match *ty {
        Type::BOOL => match text {
            "t" => Some(SqlValue::Boolean(true)),
            "f" => Some(SqlValue::Boolean(false)),
            _ => None,
        },
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => {
            text.parse().ok().map(SqlValue::Integer)
        }
        Type::FLOAT4 | Type::FLOAT8 => text.parse().ok().map(SqlValue::Float),
        Type::JSON | Type::JSONB => Some(SqlValue::Json(text.to_owned())),
        Type::BYTEA => text
            .strip_prefix("\\x")
            .and_then(|h| hex::decode(h).ok())
            .map(SqlValue::Bytes),
        _ => None,
    };
    typed.unwrap_or_else(|| SqlValue::Text(text.to_owned()))
}

/// Bytes the host holds for a row of `values`: each value's slot and what
/// it owns, and the row's own list.
pub(super) fn held(values: &[SqlValue]) -> usize {
    let owned: usize = values
        .iter()
        .map(|v| match v {
            SqlValue::Text(t) | SqlValue::Json(t) => t.capacity(),
            SqlValue::Bytes(b) => b.capacity(),
            _ => 0,
        })
        .sum();
    std::mem::size_of::<Vec<SqlValue>>() + std::mem::size_of_val(values) + owned
}

/// The size column of a row: what the server counted.
pub(super) fn row_size(text: Option<&str>) -> u64 {
    text.and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// Rows a page's first `FETCH` asks for, before any row's size is known.
const FIRST_FETCH: u64 = 64;

/// How reading a page went.
#[derive(Default)]
pub(super) struct Page {
    pub(super) rows: Vec<Vec<SqlValue>>,
    /// The cursor has no more rows.
    pub(super) exhausted: bool,
    /// The page went over its bytes: refused, its rows to be put back.
    pub(super) over: bool,
    /// Why a row cannot be handed over at all (too large, not UTF-8).
    pub(super) unreadable: Option<String>,
}

/// What one query's rows are read with.
pub(super) struct Cursor<'a> {
    pub(super) name: &'a str,
    pub(super) columns: &'a [(String, Type)],
    /// Rows handed over before this page.
    pub(super) delivered: u64,
}

/// Read up to `max` rows through `cursor`, keeping those that fit in a
/// page. Rows are fetched a few at a time, as many as the page has room
/// for at the largest row seen, so a page that overflows has read at
/// most about one page more than it keeps; each `FETCH` is bounded by
/// `statement_timeout` = `millis`.
pub(super) async fn read(
    connection: &mut Connection,
    cursor: &Cursor<'_>,
    max: u32,
    millis: u64,
) -> Result<Page, tokio_postgres::Error> {
    let mut page = Page::default();
    let mut bytes = 0usize;
    let mut largest = 0usize;
    let timeout = millis.min(i32::MAX as u64);
    while !page.over && page.unreadable.is_none() && page.rows.len() < max as usize {
        let wanted = u64::from(max) - page.rows.len() as u64;
        let room = MAX_PAGE_BYTES.saturating_sub(bytes);
        // Before any row's size is known, a few; then as many as fit at
        // the largest seen.
        let ask = room
            .checked_div(largest)
            .map_or(FIRST_FETCH, |fit| fit.max(1) as u64)
            .min(wanted);
        let fetch = format!(
            "SET LOCAL statement_timeout = {timeout}; FETCH FORWARD {ask} FROM {}",
            cursor.name
        );
        let sent = connection
            .run(async |client| {
                let stream = client.simple_query_raw(&fetch).await?;
                let mut stream = std::pin::pin!(stream);
                let mut sent = 0u64;
                while let Some(message) = stream.next().await {
                    let SimpleQueryMessage::Row(row) = message? else {
                        continue;
                    };
                    sent += 1;
                    if page.over || page.unreadable.is_some() {
                        // Drained, not kept: the cursor is put back over them.
                        continue;
                    }
                    let number = cursor.delivered + page.rows.len() as u64 + 1;
                    let size = row_size(row.try_get(0).ok().flatten());
                    if usize::try_from(size).map_or(true, |s| s > MAX_PAGE_BYTES) {
                        page.unreadable = Some(format!(
                            "row {number} of the query is {} as text, more than a page may hold ({}): select fewer or smaller columns",
                            mib(size),
                            mib(MAX_PAGE_BYTES as u64)
                        ));
                        continue;
                    }
                    let mut values = Vec::with_capacity(cursor.columns.len());
                    for (i, (name, ty)) in cursor.columns.iter().enumerate() {
                        match row.try_get(i + 1) {
                            Ok(text) => values.push(value(text, ty)),
                            Err(_) => {
                                page.unreadable = Some(format!(
                                    "row {number}: column `{name}` is not UTF-8 text (a SQL_ASCII database holding other bytes?)"
                                ));
                                break;
                            }
                        }
                    }
                    if page.unreadable.is_some() {
                        continue;
                    }
                    let cost = held(&values);
                    largest = largest.max(cost);
                    // A page's first row is kept whatever its bookkeeping:
                    // the server found its text within the bound.
                    if !page.rows.is_empty() && bytes.saturating_add(cost) > MAX_PAGE_BYTES {
                        page.over = true;
                        page.rows.clear();
                        continue;
                    }
                    bytes += cost;
                    page.rows.push(values);
                }
                Ok(sent)
            })
            .await?;
        if sent < ask {
            page.exhausted = true;
            break;
        }
    }
    Ok(page)
}

/// `bytes` in MiB, for messages.
pub(super) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_of_many_small_values_is_counted_by_its_slots() {
        let row = vec![SqlValue::Null; 1_000];
        assert!(held(&row) >= 1_000 * std::mem::size_of::<SqlValue>());
        let text = vec![SqlValue::Text("x".repeat(100)); 10];
        assert!(held(&text) >= 1_000);
    }

    #[test]
    fn a_trailing_comment_or_semicolon_stays_inside_the_subquery() {
        let sql = declare("c", "SELECT 1 -- the end;\n ;  ", false);
        assert!(declare("c", "SELECT 1", true).contains("convert_to(weir_q::text, 'UTF8')"));
        assert!(sql.contains("SELECT 1 -- the end\n) AS weir_s"), "{sql}");
    }
}
