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

use tokio_postgres::types::{ToSql, Type};

use crate::plugin::bindings::syncing_connector::weir::plugin::sql::SqlValue;

/// Most rows one `next` hands over.
pub(super) const MAX_PAGE_ROWS: u32 = 10_000;
/// Most bytes one page of rows may take in the host (values and their
/// bookkeeping); a single row's text is bounded by it too.
pub(super) const MAX_PAGE_BYTES: usize = 64 << 20;

/// `DECLARE` for `statement`'s rows through `cursor`: column 0 is the
/// row's size as text, then the statement's own columns (null when the
/// row is over [`MAX_PAGE_BYTES`]). The statement is a subquery here; the
/// line breaks keep a trailing `--` comment from swallowing the rest, and
/// `OFFSET 0` keeps the planner from pulling it up, which would compute
/// its columns once for each reference to the row.
pub(super) fn declare(cursor: &str, statement: &str) -> String {
    let statement = statement.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    format!(
        "DECLARE {cursor} SCROLL CURSOR FOR SELECT weir_size.bytes, weir_row.* \
         FROM (SELECT * FROM (\n{statement}\n) AS weir_s OFFSET 0) AS weir_q \
         CROSS JOIN LATERAL (SELECT octet_length(weir_q::text)::int8 AS bytes) AS weir_size \
         LEFT JOIN LATERAL (SELECT (weir_q).* WHERE weir_size.bytes <= {MAX_PAGE_BYTES}) AS weir_row ON true"
    )
}

/// The parameter's type and value, as the statement receives it.
pub(super) fn param(value: &SqlValue) -> (Type, Box<dyn ToSql + Sync + Send>) {
    match value {
        SqlValue::Null => (Type::TEXT, Box::new(None::<String>)),
        SqlValue::Boolean(b) => (Type::BOOL, Box::new(*b)),
        SqlValue::Integer(i) => (Type::INT8, Box::new(*i)),
        SqlValue::Float(f) => (Type::FLOAT8, Box::new(*f)),
        SqlValue::Text(t) | SqlValue::Json(t) => (Type::TEXT, Box::new(t.clone())),
        SqlValue::Bytes(b) => (Type::BYTEA, Box::new(b.clone())),
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
        let sql = declare("c", "SELECT 1 -- the end;\n ;  ");
        assert!(sql.contains("SELECT 1 -- the end\n) AS weir_s"), "{sql}");
    }
}
