//! The host side of the `sql` interface (contract 0.2.2): queries against
//! the databases a plugin's config grants (`grants.sql`), PostgreSQL
//! through `tokio-postgres`, on the host's I/O runtime.
//!
//! - **Where**: a grant's URL is read once into a [`SqlTarget`], and the
//!   connection is made from that alone, its names looked up once and the
//!   addresses found dialled (`target.rs`, `connection.rs`).
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

mod connection;
mod page;
mod target;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::types::{ToSql, Type};
use wasmtime::component::Resource;

use super::{PluginState, Wasm};
use crate::core::limit::Limit;
use crate::plugin::bindings::syncing_connector::weir::plugin::sql::{self, Column, SqlValue};
use crate::plugin::resources::SqlRows;
use connection::{Connection, failed};
use page::{Cursor, MAX_PAGE_BYTES, MAX_PAGE_ROWS, mib};
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
/// The longest `statement_timeout` the server takes, in milliseconds.
const MAX_SERVER_MILLIS: u64 = i32::MAX as u64;

/// A plugin's databases: what its config grants, and the connections made.
#[derive(Default)]
pub(crate) struct SqlSession {
    grants: Arc<BTreeMap<String, String>>,
    /// The tenant whose plugin this is: names may not lead to this machine,
    /// and its user may only read.
    tenant: Option<Arc<str>>,
    connections: HashMap<String, Connection>,
    queries: u64,
    /// `rows` the plugin holds.
    held: usize,
}

impl SqlSession {
    pub(crate) fn new(grants: Arc<BTreeMap<String, String>>, tenant: Option<Arc<str>>) -> Self {
        Self {
            grants,
            tenant,
            ..Self::default()
        }
    }

    /// Whether a query's transaction is open, or a statement's answer due.
    pub(crate) fn has_open(&self) -> bool {
        self.connections
            .values()
            .any(|c| c.open.is_some() || !c.usable())
    }

    /// End every open query, as a call that opened them returns: their
    /// rows are over, what still runs is cancelled, their transactions
    /// rolled back. A connection that cannot be told is dropped.
    pub(crate) async fn end_queries(&mut self) {
        let mut lost = Vec::new();
        for (name, connection) in &mut self.connections {
            if connection.end().await.is_err() {
                lost.push(name.clone());
            }
        }
        for name in lost {
            self.connections.remove(&name);
        }
    }

    /// Drop the connections with an open query or a statement running:
    /// closing the socket ends the server's session.
    pub(crate) fn drop_open(&mut self) {
        self.connections
            .retain(|_, c| c.open.is_none() && c.usable());
    }

    /// Forget `database`'s connection: after an error its state is unknown.
    fn lose(&mut self, database: &str) {
        self.connections.remove(database);
    }
}

impl PluginState {
    /// Count a refusal at `limit` (`weir_limit_hits_total`): the query's
    /// error goes to the plugin, which decides what fails.
    fn limit_hit(&self, limit: Limit) {
        crate::telemetry::meters::limit_hit(&self.plugin, self.sql.tenant.as_deref(), limit);
    }

    /// Milliseconds left of the call, at least 1, at most what the server
    /// takes as a timeout.
    fn millis_left(&self) -> u64 {
        self.http_policy
            .deadline
            .map_or(MAX_SERVER_MILLIS, |at| {
                u64::try_from(at.saturating_duration_since(Instant::now()).as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1)
            })
            .min(MAX_SERVER_MILLIS)
    }

    /// The connection to `database`, made if needed.
    async fn connection(&mut self, database: &str) -> Result<&mut Connection, String> {
        let usable = self
            .sql
            .connections
            .get(database)
            .is_some_and(Connection::usable);
        if !usable {
            self.sql.lose(database);
            let Some(url) = self.sql.grants.get(database) else {
                let granted: Vec<&str> = self.sql.grants.keys().map(String::as_str).collect();
                return Err(format!(
                    "database `{database}` is not granted to the plugin (grants.sql names: [{}])",
                    granted.join(", ")
                ));
            };
            let target = SqlTarget::parse(url)
                .map_err(|e| format!("database `{database}`: its URL in grants.sql {e}"))?;
            let wait = Duration::from_millis(self.millis_left()).min(CONNECT_TIMEOUT);
            let connection = Connection::open(
                database,
                &target,
                self.sql.tenant.is_some(),
                wait,
                &format!("weir {}", self.plugin),
            )
            .await?;
            self.sql.connections.insert(database.to_owned(), connection);
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
            self.limit_hit(Limit::SqlBytes);
            return Err(format!(
                "database `{database}`: a statement may hold {} and its parameters {}; this one holds {} and {}",
                mib(MAX_STATEMENT_BYTES as u64),
                mib(MAX_PAGE_BYTES as u64),
                mib(statement.len() as u64),
                mib(param_bytes as u64)
            ));
        }
        if self.sql.held >= MAX_OPEN_ROWS {
            self.limit_hit(Limit::Handles);
            return Err(format!(
                "the plugin holds {MAX_OPEN_ROWS} rows of queries already, the most it may: drop those it is done with"
            ));
        }
        let millis = self.millis_left();
        self.sql.queries += 1;
        let serial = self.sql.queries;
        let cursor = format!("weir_rows_{serial}");
        // A new query ends the last one of its connection.
        let connection = self.connection(database).await?;
        if connection.open.is_some()
            && let Err(e) = connection.end().await
        {
            self.sql.lose(database);
            return Err(failed(database, &e));
        }
        let connection = self.connection(database).await?;
        let convert = connection.convert;
        // Open from here: whatever fails, the end of the call rolls back.
        connection.open = Some(serial);
        let (types, values): (Vec<Type>, Vec<&(dyn ToSql + Sync)>) =
            params.iter().map(page::param).unzip();
        let declared = connection
            .run(async |client| {
                client
                    .batch_execute(&format!(
                        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
                         SET LOCAL statement_timeout = {millis}; \
                         SET LOCAL idle_in_transaction_session_timeout = {}",
                        millis.saturating_add(1_000).min(MAX_SERVER_MILLIS)
                    ))
                    .await?;
                let prepared = client.prepare_typed(statement, &types).await?;
                let columns: Vec<(String, Type)> = prepared
                    .columns()
                    .iter()
                    .map(|c| (c.name().to_owned(), c.type_().clone()))
                    .collect();
                if columns.is_empty() {
                    return Ok(None);
                }
                let declare = page::declare(&cursor, statement, convert);
                client
                    .execute_raw(&client.prepare_typed(&declare, &types).await?, values)
                    .await?;
                Ok(Some(columns))
            })
            .await;
        let columns = match declared {
            Ok(Some(columns)) => columns,
            Ok(None) => {
                if connection.end().await.is_err() {
                    self.sql.lose(database);
                }
                return Err(format!(
                    "database `{database}`: the statement returns no rows (only queries run here: SELECT, WITH, VALUES, TABLE)"
                ));
            }
            Err(e) => {
                if connection.end().await.is_err() {
                    self.sql.lose(database);
                }
                return Err(failed(database, &e));
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

    async fn fetch(
        &mut self,
        rows: &Resource<SqlRows>,
        max: u32,
    ) -> Wasm<Result<Vec<Vec<SqlValue>>, String>> {
        let millis = self.millis_left();
        let r = self.table.get(rows)?;
        if let Some(why) = &r.failed {
            return Ok(Err(why.clone()));
        }
        if r.done {
            return Ok(Ok(Vec::new()));
        }
        let database = r.database.clone();
        let max = max.clamp(1, MAX_PAGE_ROWS);
        let Some(connection) = self
            .sql
            .connections
            .get_mut(&database)
            .filter(|c| c.open == Some(r.serial))
        else {
            return Ok(Err(format!(
                "database `{database}`: these rows are over (a later query, the end of the call that opened them, or a lost connection ended them)"
            )));
        };
        let cursor = Cursor {
            name: &r.cursor,
            columns: &r.columns,
            delivered: r.delivered,
        };
        let read = page::read(connection, &cursor, max, millis).await;
        let moved = match &read {
            // Put the page back: the next `next` reads the same rows.
            Ok(page) if page.over => {
                let back = format!("MOVE ABSOLUTE {} IN {}", r.delivered, r.cursor);
                connection
                    .run(async |client| client.batch_execute(&back).await)
                    .await
            }
            _ => Ok(()),
        };
        let outcome = match (read, moved) {
            (Err(e), _) | (_, Err(e)) => Err(failed(&database, &e)),
            (Ok(page), Ok(())) => Ok(page),
        };
        let page = match outcome {
            Ok(page) if page.unreadable.is_none() => page,
            Ok(page) => {
                let why = format!(
                    "database `{database}`: {}",
                    page.unreadable.unwrap_or_default()
                );
                crate::telemetry::meters::limit_hit(
                    &self.plugin,
                    self.sql.tenant.as_deref(),
                    Limit::SqlBytes,
                );
                if connection.end().await.is_err() {
                    self.sql.lose(&database);
                }
                self.table.get_mut(rows)?.failed = Some(why.clone());
                return Ok(Err(why));
            }
            Err(why) => {
                if connection.end().await.is_err() {
                    self.sql.lose(&database);
                }
                return Ok(Err(why));
            }
        };
        if page.over {
            crate::telemetry::meters::limit_hit(
                &self.plugin,
                self.sql.tenant.as_deref(),
                Limit::SqlBytes,
            );
            return Ok(Err(format!(
                "database `{database}`: a page of {max} rows holds more than {} in the host: ask for fewer (the rows stay for the next call)",
                mib(MAX_PAGE_BYTES as u64)
            )));
        }
        if page.exhausted && connection.end().await.is_err() {
            self.sql.lose(&database);
        }
        let r = self.table.get_mut(rows)?;
        r.delivered += page.rows.len() as u64;
        r.done = page.exhausted;
        Ok(Ok(page.rows))
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
            && connection.end().await.is_err()
        {
            self.sql.lose(&rows.database);
        }
        Ok(())
    }
}
