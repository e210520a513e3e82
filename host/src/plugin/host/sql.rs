//! The host side of the `sql` interface (contract 0.2.2): queries against
//! the databases a plugin's config grants (`grants.sql`), PostgreSQL
//! through `tokio-postgres`, on the host's I/O runtime.
//!
//! Each query runs in a read-only `REPEATABLE READ` transaction of its own,
//! with `statement_timeout` set to what is left of the call's deadline, and
//! is read through a cursor a page at a time; values come over as their
//! text (the simple protocol) and are typed here by their column's type.
//! One query per database is open at a time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};
use wasmtime::component::Resource;

use super::{PluginState, Wasm};
use crate::plugin::bindings::syncing_connector::weir::plugin::sql::{self, Column, SqlValue};

/// Most rows one `next` hands over.
const MAX_PAGE_ROWS: u32 = 10_000;
/// Most bytes of values one `next` hands over.
const MAX_PAGE_BYTES: usize = 64 << 20;
/// Longest wait to connect, whatever the call's deadline.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The rows of one query: the cursor they are read through.
pub struct SqlRows {
    database: String,
    /// Which query of its connection this is.
    serial: u64,
    cursor: String,
    columns: Vec<(String, Type)>,
    done: bool,
}

/// A plugin's databases: what its config grants, and the connections made.
#[derive(Default)]
pub(crate) struct SqlSession {
    grants: Arc<BTreeMap<String, String>>,
    connections: HashMap<String, Connection>,
    queries: u64,
}

impl SqlSession {
    pub(crate) fn new(grants: Arc<BTreeMap<String, String>>) -> Self {
        Self {
            grants,
            ..Self::default()
        }
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

/// The parameter's type and value, as the statement receives it.
fn param(value: &SqlValue) -> (Type, Box<dyn ToSql + Sync + Send>) {
    match value {
        SqlValue::Null => (Type::TEXT, Box::new(None::<String>)),
        SqlValue::Boolean(b) => (Type::BOOL, Box::new(*b)),
        SqlValue::Integer(i) => (Type::INT8, Box::new(*i)),
        SqlValue::Float(f) => (Type::FLOAT8, Box::new(*f)),
        SqlValue::Text(t) | SqlValue::Json(t) => (Type::TEXT, Box::new(t.clone())),
        SqlValue::Bytes(b) => (Type::BYTEA, Box::new(b.clone())),
    }
}

/// A value the server sent as text, typed by its column.
fn value(text: Option<&str>, ty: &Type) -> SqlValue {
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

fn value_bytes(value: &SqlValue) -> usize {
    match value {
        SqlValue::Text(t) | SqlValue::Json(t) => t.len(),
        SqlValue::Bytes(b) => b.len(),
        _ => 8,
    }
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
            let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
                format!("database `{database}`: its URL in grants.sql is not one: {e}")
            })?;
            let wait = std::time::Duration::from_millis(self.millis_left()).min(CONNECT_TIMEOUT);
            config
                .connect_timeout(wait)
                .application_name(format!("weir {}", self.plugin));
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
        let millis = self.millis_left();
        self.sql.queries += 1;
        let serial = self.sql.queries;
        let connection = self.connection(database).await?;
        let client = &connection.client;
        if connection.open.take().is_some() {
            client
                .batch_execute("ROLLBACK")
                .await
                .map_err(|e| failed(database, &e))?;
        }
        client
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = {millis}"
            ))
            .await
            .map_err(|e| failed(database, &e))?;
        let (types, values): (Vec<Type>, Vec<Box<dyn ToSql + Sync + Send>>) =
            params.iter().map(param).unzip();
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
            let declare = format!("DECLARE {cursor} NO SCROLL CURSOR FOR {statement}");
            let refs: Vec<&(dyn ToSql + Sync)> =
                values.iter().map(|v| &**v as &(dyn ToSql + Sync)).collect();
            client
                .execute_raw(&client.prepare_typed(&declare, &types).await?, refs)
                .await?;
            Ok::<_, tokio_postgres::Error>(Some(columns))
        };
        let declared = declared.await;
        let columns = match declared {
            Ok(Some(columns)) => columns,
            other => {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(match other {
                    Err(e) => failed(database, &e),
                    _ => format!(
                        "database `{database}`: the statement returns no rows (only queries run here: SELECT, WITH, VALUES, TABLE)"
                    ),
                });
            }
        };
        connection.open = Some(serial);
        Ok(SqlRows {
            database: database.to_owned(),
            serial,
            cursor,
            columns,
            done: false,
        })
    }

    async fn fetch(
        &mut self,
        rows: &Resource<SqlRows>,
        max: u32,
    ) -> Wasm<Result<Vec<Vec<SqlValue>>, String>> {
        let (database, serial, cursor, done) = {
            let r = self.table.get(rows)?;
            (r.database.clone(), r.serial, r.cursor.clone(), r.done)
        };
        if done {
            return Ok(Ok(Vec::new()));
        }
        let max = max.clamp(1, MAX_PAGE_ROWS);
        let Some(connection) = self
            .sql
            .connections
            .get_mut(&database)
            .filter(|c| c.open == Some(serial))
        else {
            return Ok(Err(format!(
                "database `{database}`: these rows are over (a later query, or a lost connection, ended them)"
            )));
        };
        let fetched = connection
            .client
            .simple_query(&format!("FETCH FORWARD {max} FROM {cursor}"))
            .await;
        let messages = match fetched {
            Ok(messages) => messages,
            Err(e) => {
                connection.open = None;
                let _ = connection.client.batch_execute("ROLLBACK").await;
                return Ok(Err(failed(&database, &e)));
            }
        };
        let columns = self.table.get(rows)?.columns.clone();
        let mut page = Vec::new();
        let mut bytes = 0usize;
        for message in messages {
            let SimpleQueryMessage::Row(row) = message else {
                continue;
            };
            let values: Vec<SqlValue> = columns
                .iter()
                .enumerate()
                .map(|(i, (_, ty))| value(row.get(i), ty))
                .collect();
            bytes += values.iter().map(value_bytes).sum::<usize>();
            if bytes > MAX_PAGE_BYTES {
                return Ok(Err(format!(
                    "database `{database}`: a page of {max} rows holds more than {} MiB: ask for fewer",
                    MAX_PAGE_BYTES >> 20
                )));
            }
            page.push(values);
        }
        if page.len() < max as usize {
            if let Some(connection) = self.sql.connections.get_mut(&database) {
                connection.open = None;
                let ended = connection
                    .client
                    .batch_execute(&format!("CLOSE {cursor}; COMMIT"))
                    .await;
                if let Err(e) = ended {
                    return Ok(Err(failed(&database, &e)));
                }
            }
            self.table.get_mut(rows)?.done = true;
        }
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
                Ok(handle) => Ok(Ok(handle)),
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
        // Its transaction ends with the next query (or the connection).
        self.table.delete(rows)?;
        Ok(())
    }
}
