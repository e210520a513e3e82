//! sql-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Publish one document per row of a SQL query (PostgreSQL, through the
/// host's `sql` interface), and keep an index in step with the table by
/// running again.
///
/// The host connects to the database the config grants under `database`
/// (`grants.sql = { main = "${DATABASE_URL}" }`); the plugin never sees the
/// URL. Each run's query is one read-only snapshot, read through a cursor
/// `page_size` rows at a time. A row's document has `id_prefix` and the
/// text of its `id_column` as its id, and each column as a field (numbers,
/// booleans, text, JSON as JSON, bytes in base64; nulls left out; a column
/// named `id`, `run_id`, `_children` or `_deleted` is not a field).
///
/// Incremental sync, with `cursor_columns`: the query takes the last
/// cursor as its parameters (`$1`, `$2`, ... in the order of the columns,
/// as text: cast them) and orders by the cursor columns, so each run sends
/// only the rows changed since the last one. Sorting by a timestamp and a
/// unique key (`WHERE (updated_at, id) > ($1::timestamptz, $2::bigint)
/// ORDER BY updated_at, id`) misses nothing and sends nothing twice; the
/// first run takes `cursor_start`. The cursor is committed only once every
/// row before it is done. Deletes come two ways: `deleted_column`, a soft
/// delete (a row whose column is true, or not null and not false, becomes
/// a deletion marker; the query must return such rows), or `keys_query`,
/// a query of every id the table holds now: ids sent by earlier runs that
/// it no longer returns are deleted (the connector keeps every id sent in
/// its state for that).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The database, by its name in the connector's `grants.sql`.
    #[serde(default = "default_database")]
    pub database: String,
    /// The query of the rows to send: one `SELECT` (or `WITH`, `VALUES`,
    /// `TABLE`); with `cursor_columns`, taking the cursor as `$1`, `$2`, ...
    pub query: String,
    /// The column whose value (as text) is each document's id.
    pub id_column: String,
    /// Text put before every id (to keep the ids of several sources apart).
    #[serde(default)]
    pub id_prefix: String,
    /// The columns whose values, in the last row sent, are the next run's
    /// query parameters (in this order); the query must order by them.
    /// Empty: every run sends every row.
    #[serde(default)]
    pub cursor_columns: Vec<String>,
    /// The parameters of the first run, one per cursor column (as text).
    #[serde(default)]
    pub cursor_start: Vec<String>,
    /// A column marking rows deleted at the source (a soft delete): such a
    /// row becomes a deletion marker.
    pub deleted_column: Option<String>,
    /// A query returning the id column of every row the table holds now:
    /// ids sent before that it no longer returns are deleted.
    pub keys_query: Option<String>,
    /// Rows read per page (1 to 10,000).
    #[serde(default = "default_page_size")]
    pub page_size: u32,
}

fn default_database() -> String {
    "main".into()
}

fn default_page_size() -> u32 {
    1000
}
