//! The host side of the `sql` interface (contract 0.2.2): queries against
//! the databases a plugin's config grants (`grants.sql`), PostgreSQL
//! through `tokio-postgres`, on the host's I/O runtime.
//!
//! - **Where**: a grant's URL is read once into a [`SqlTarget`], and the
//!   connection is made from that alone (`target.rs`).
//! - **Nothing written**: the session is read-only from its start
//!   (`default_transaction_read_only`), each query runs in a read-only
//!   `REPEATABLE READ` transaction of its own that is always rolled back,
//!   never committed, and session-level locks are released with it: what
//!   a function does inside it (`lo_create`, ...) is undone.
//! - **Within its call**: a query's transaction ends when its rows end, when
//!   they are dropped, and at the latest when the plugin call that opened
//!   it returns ([`SqlSession::end_queries`]); `statement_timeout` and
//!   `idle_in_transaction_session_timeout` bound it on the server too.
//! - **Sized before it is taken in**: rows are read a page at a time through
//!   a scrolling cursor that sizes each row on the server (`page.rs`); a
//!   page too large is refused and its rows put back.
//!
//! One query per database is open at a time.

mod page;
mod target;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};
use wasmtime::component::Resource;

use super::{PluginState, Wasm};
use crate::plugin::bindings::syncing_connector::weir::plugin::sql::{self, Column, SqlValue};
use page::{MAX_PAGE_BYTES, MAX_PAGE_ROWS};
pub(crate) use target::SqlTarget;

/// Longest wait to connect, whatever the call's deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest statement a query may send.
const MAX_STATEMENT_BYTES: usize = 1 << 20;
/// Most `rows` a plugin instance may hold at once (each query makes one;
/// dropping it gives its place back).
const MAX_OPEN_ROWS: usize = 64;
/// Longest wait to end a call's open queries before their connection is
/// dropped instead (the server then rolls back).
pub(crate) const END_QUERIES_WAIT: Duration = Duration::from_secs(5);
/// What ends a query: its transaction rolled back, and whatever session
/// locks its functions took released.
const END_QUERY: &str = "ROLLBACK; SELECT pg_advisory_unlock_all()";

/// The rows of one query: the cursor they are read through.
pub struct SqlRows {
    database: String,
    /// Which query of its connection this is.
    serial: u64,
    cursor: String,
    columns: Vec<(String, Type)>,
    /// Rows handed over so far: where a refused page puts the cursor back.
    delivered: u64,
    done: bool,
    /// Why every later `next` fails, once one row could not be handed over.
    failed: Option<String>,
}

/// A plugin's databases: what its config grants, and the connections made.
#[derive(Default)]
pub(crate) struct SqlSession {
    grants: Arc<BTreeMap<String, String>>,
    connections: HashMap<String, Connection>,
    queries: u64,
    /// `rows` the plugin holds.
    held: usize,
}

impl SqlSession {
    pub(crate) fn new(grants: Arc<BTreeMap<String, String>>) -> Self {
        Self {
            grants,
            ..Self::default()
        }
    }

    /// Whether a query's transaction is open.
    pub(crate) fn has_open(&self) -> bool {
        self.connections.values().any(|c| c.open.is_some())
    }

    /// End every open query, as a call that opened them returns: their
    /// rows are over, their transactions rolled back. A connection that
    /// cannot be told is dropped (see [`Self::drop_open`]).
    pub(crate) async fn end_queries(&mut self) {
        let mut lost = Vec::new();
        for (name, connection) in &mut self.connections {
            if connection.open.take().is_some()
                && connection.client.batch_execute(END_QUERY).await.is_err()
            {
                lost.push(name.clone());
            }
        }
        for name in lost {
            self.connections.remove(&name);
        }
    }

    /// Drop the connections with an open query: closing the socket ends
    /// the server's session and rolls its transaction back.
    pub(crate) fn drop_open(&mut self) {
        self.connections.retain(|_, c| c.open.is_none());
    }
}

struct Connection {
    client: Client,
    /// The query whose transaction is open, if one is.
    open: Option<u64>,
}

fn failed(database: &str, e: &tokio_postgres::Error) -> String {
    // The server's own message where there is one; never the URL.
    let why = e.as_db_error().map_or_else(
        || e.to_string(),
        |db| format!("{}: {}", db.code().code(), db.message()),
    );
    format!("database `{database}`: {why}")
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// How one `FETCH` went.
#[derive(Default)]
struct Fetched {
    page: Vec<Vec<SqlValue>>,
    /// Rows the server sent, kept or not.
    sent: u64,
    /// The page went over its bytes and was not kept whole.
    over: bool,
    /// A row too large for any page: its number and size.
    too_large: Option<(u64, u64)>,
}

impl PluginState {
    /// Milliseconds left of the call, at least 1.
    fn millis_left(&self) -> u64 {
        self.http_policy.deadline.map_or(u64::from(u32::MAX), |at| {
            u64::try_from(at.saturating_duration_since(Instant::now()).as_millis())
                .unwrap_or(u64::MAX)
                .max(1)
        })
    }

    /// The connection to `database`, made if needed.
    async fn connection(&mut self, database: &str) -> Result<&mut Connection, String> {
        let usable = self
            .sql
            .connections
            .get(database)
            .is_some_and(|c| !c.client.is_closed());
        if !usable {
            let Some(url) = self.sql.grants.get(database) else {
                let granted: Vec<&str> = self.sql.grants.keys().map(String::as_str).collect();
                return Err(format!(
                    "database `{database}` is not granted to the plugin (grants.sql names: [{}])",
                    granted.join(", ")
                ));
            };
            let target = SqlTarget::parse(url)
                .map_err(|e| format!("database `{database}`: its URL in grants.sql {e}"))?;
            let mut config = target.connect_config();
            let wait = Duration::from_millis(self.millis_left()).min(CONNECT_TIMEOUT);
            config
                .connect_timeout(wait)
                .application_name(format!("weir {}", self.plugin))
                // Read-only from the start: nothing outside a query's own
                // transaction can write either.
                .options("-c default_transaction_read_only=on");
            let (client, connection) = config
                .connect(NoTls)
                .await
                .map_err(|e| failed(database, &e))?;
            let name = database.to_owned();
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(database = %name, error = %e, "a plugin's database connection ended");
                }
            });
            self.sql
                .connections
                .insert(database.to_owned(), Connection { client, open: None });
        }
        self.sql
            .connections
            .get_mut(database)
            .ok_or_else(|| format!("database `{database}`: no connection"))
    }

    async fn start_query(
        &mut self,
        database: &str,
        statement: &str,
        params: &[SqlValue],
    ) -> Result<SqlRows, String> {
        let param_bytes: usize = params.iter().map(page::param_bytes).sum();
        if statement.len() > MAX_STATEMENT_BYTES || param_bytes > MAX_PAGE_BYTES {
            return Err(format!(
                "database `{database}`: a statement may hold {} and its parameters {}; this one holds {} and {}",
                mib(MAX_STATEMENT_BYTES as u64),
                mib(MAX_PAGE_BYTES as u64),
                mib(statement.len() as u64),
                mib(param_bytes as u64)
            ));
        }
        if self.sql.held >= MAX_OPEN_ROWS {
            return Err(format!(
                "the plugin holds {MAX_OPEN_ROWS} rows of queries already, the most it may: drop those it is done with"
            ));
        }
        let millis = self.millis_left();
        self.sql.queries += 1;
        let serial = self.sql.queries;
        let connection = self.connection(database).await?;
        let client = &connection.client;
        if connection.open.take().is_some() {
            client
                .batch_execute(END_QUERY)
                .await
                .map_err(|e| failed(database, &e))?;
        }
        client
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
                 SET LOCAL statement_timeout = {millis}; \
                 SET LOCAL idle_in_transaction_session_timeout = {}",
                millis.saturating_add(1_000).min(i32::MAX as u64)
            ))
            .await
            .map_err(|e| failed(database, &e))?;
        // Open from here: whatever fails below, the call's end rolls back.
        connection.open = Some(serial);
        let (types, values): (Vec<Type>, Vec<Box<dyn ToSql + Sync + Send>>) =
            params.iter().map(page::param).unzip();
        let cursor = format!("weir_rows_{serial}");
        let declared = async {
            let prepared = client.prepare_typed(statement, &types).await?;
            let columns: Vec<(String, Type)> = prepared
                .columns()
                .iter()
                .map(|c| (c.name().to_owned(), c.type_().clone()))
                .collect();
            if columns.is_empty() {
                return Ok(None);
            }
            let declare = page::declare(&cursor, statement);
            let refs: Vec<&(dyn ToSql + Sync)> =
                values.iter().map(|v| &**v as &(dyn ToSql + Sync)).collect();
            client
                .execute_raw(&client.prepare_typed(&declare, &types).await?, refs)
                .await?;
            Ok::<_, tokio_postgres::Error>(Some(columns))
        };
        let columns = match declared.await {
            Ok(Some(columns)) => columns,
            other => {
                connection.open = None;
                let _ = client.batch_execute(END_QUERY).await;
                return Err(match other {
                    Err(e) => failed(database, &e),
                    _ => format!(
                        "database `{database}`: the statement returns no rows (only queries run here: SELECT, WITH, VALUES, TABLE)"
                    ),
                });
            }
        };
        Ok(SqlRows {
            database: database.to_owned(),
            serial,
            cursor,
            columns,
            delivered: 0,
            done: false,
            failed: None,
        })
    }

    /// Read up to `max` rows, keeping those that fit in a page.
    async fn read_page(
        client: &Client,
        rows: &SqlRows,
        max: u32,
    ) -> Result<Fetched, tokio_postgres::Error> {
        let stream = client
            .simple_query_raw(&format!("FETCH FORWARD {max} FROM {}", rows.cursor))
            .await?;
        let mut stream = std::pin::pin!(stream);
        let mut out = Fetched::default();
        let mut bytes = 0usize;
        while let Some(message) = stream.next().await {
            let SimpleQueryMessage::Row(row) = message? else {
                continue;
            };
            out.sent += 1;
            if out.over || out.too_large.is_some() {
                // Drained, not kept: the cursor is put back over them.
                continue;
            }
            let size = page::row_size(row.get(0));
            if usize::try_from(size).map_or(true, |s| s > MAX_PAGE_BYTES) {
                out.too_large = Some((rows.delivered + out.sent, size));
                continue;
            }
            let values: Vec<SqlValue> = rows
                .columns
                .iter()
                .enumerate()
                .map(|(i, (_, ty))| page::value(row.get(i + 1), ty))
                .collect();
            let cost = page::held(&values);
            // A page's first row is kept whatever its bookkeeping: the
            // server found its text within the bound.
            if !out.page.is_empty() && bytes.saturating_add(cost) > MAX_PAGE_BYTES {
                out.over = true;
                out.page.clear();
                continue;
            }
            bytes += cost;
            out.page.push(values);
        }
        Ok(out)
    }

    async fn fetch(
        &mut self,
        rows: &Resource<SqlRows>,
        max: u32,
    ) -> Wasm<Result<Vec<Vec<SqlValue>>, String>> {
        let r = self.table.get(rows)?;
        if let Some(why) = &r.failed {
            return Ok(Err(why.clone()));
        }
        if r.done {
            return Ok(Ok(Vec::new()));
        }
        let (database, serial) = (r.database.clone(), r.serial);
        let max = max.clamp(1, MAX_PAGE_ROWS);
        let Some(connection) = self
            .sql
            .connections
            .get_mut(&database)
            .filter(|c| c.open == Some(serial))
        else {
            return Ok(Err(format!(
                "database `{database}`: these rows are over (a later query, the end of the call that opened them, or a lost connection ended them)"
            )));
        };
        let r = self.table.get(rows)?;
        let fetched = Self::read_page(&connection.client, r, max).await;
        let fetched = match fetched {
            Ok(fetched) => fetched,
            Err(e) => {
                connection.open = None;
                let _ = connection.client.batch_execute(END_QUERY).await;
                return Ok(Err(failed(&database, &e)));
            }
        };
        if let Some((row, size)) = fetched.too_large {
            connection.open = None;
            let _ = connection.client.batch_execute(END_QUERY).await;
            let why = format!(
                "database `{database}`: row {row} of the query is {} as text, more than a page may hold ({}): select fewer or smaller columns",
                mib(size),
                mib(MAX_PAGE_BYTES as u64)
            );
            self.table.get_mut(rows)?.failed = Some(why.clone());
            return Ok(Err(why));
        }
        let delivered = self.table.get(rows)?.delivered;
        if fetched.over {
            // Put the page back: the next `next` reads the same rows.
            let back = connection
                .client
                .batch_execute(&format!(
                    "MOVE ABSOLUTE {delivered} IN {}",
                    self.table.get(rows)?.cursor
                ))
                .await;
            if let Err(e) = back {
                connection.open = None;
                return Ok(Err(failed(&database, &e)));
            }
            return Ok(Err(format!(
                "database `{database}`: a page of {max} rows holds more than {} in the host: ask for fewer (the rows stay for the next call)",
                mib(MAX_PAGE_BYTES as u64)
            )));
        }
        let page = fetched.page;
        let ended = fetched.sent < u64::from(max);
        if ended {
            connection.open = None;
            if let Err(e) = connection.client.batch_execute(END_QUERY).await {
                return Ok(Err(failed(&database, &e)));
            }
        }
        let r = self.table.get_mut(rows)?;
        r.delivered = delivered + page.len() as u64;
        r.done = ended;
        Ok(Ok(page))
    }
}

impl sql::Host for PluginState {
    async fn query(
        &mut self,
        database: String,
        statement: String,
        params: Vec<SqlValue>,
    ) -> Wasm<Result<Resource<SqlRows>, String>> {
        match self.start_query(&database, &statement, &params).await {
            Ok(rows) => match self.table.push(rows) {
                Ok(handle) => {
                    self.sql.held += 1;
                    Ok(Ok(handle))
                }
                Err(e) => Ok(Err(format!("too many open handles: {e}"))),
            },
            Err(why) => Ok(Err(crate::core::text::clip_message(why))),
        }
    }
}

impl sql::HostRows for PluginState {
    async fn columns(&mut self, rows: Resource<SqlRows>) -> Wasm<Vec<Column>> {
        Ok(self
            .table
            .get(&rows)?
            .columns
            .iter()
            .map(|(name, ty)| Column {
                name: name.clone(),
                type_name: ty.name().to_owned(),
            })
            .collect())
    }

    async fn next(
        &mut self,
        rows: Resource<SqlRows>,
        max: u32,
    ) -> Wasm<Result<Vec<Vec<SqlValue>>, String>> {
        self.fetch(&rows, max).await
    }

    async fn drop(&mut self, rows: Resource<SqlRows>) -> Wasm<()> {
        let rows = self.table.delete(rows)?;
        self.sql.held = self.sql.held.saturating_sub(1);
        // Dropping the rows ends their query's transaction.
        if let Some(connection) = self
            .sql
            .connections
            .get_mut(&rows.database)
            .filter(|c| c.open == Some(rows.serial))
        {
            connection.open = None;
            if connection.client.batch_execute(END_QUERY).await.is_err() {
                self.sql.connections.remove(&rows.database);
            }
        }
        Ok(())
    }
}
