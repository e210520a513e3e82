//! One connection to a granted database.
//!
//! - Made from the grant's [`SqlTarget`] alone. Each name is looked up once
//!   and the connection dials the addresses found (`hostaddr`), so what is
//!   checked is what is dialled; under a tenant, a name other than
//!   `localhost` that leads to this machine (loopback, unspecified) or a
//!   link-local address is refused: only an address the tenant's policy
//!   lists may lead there, written as that address.
//! - Read-only from its start (`default_transaction_read_only`); under a
//!   tenant, refused when its user's powers reach past the database
//!   (superuser, server files and programs, other sessions, `dblink`).
//! - Ended whatever state a call cut short left it in: a statement whose
//!   answer was never read to the end is cancelled on the server (a cancel
//!   request), then the transaction is rolled back; a connection that
//!   cannot be told is dropped, and dropping it closes its socket.

use std::net::IpAddr;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::config::Config;
use tokio_postgres::{Client, NoTls};

use super::super::http::{AddressClass, Host, Resolve, SystemResolver, classify};
use super::SqlTarget;

/// What ends a query: its transaction rolled back, and whatever session
/// locks its functions took released.
const END_QUERY: &str = "ROLLBACK; SELECT pg_advisory_unlock_all()";
/// Most addresses one name may lead to that are dialled.
const MAX_ADDRESSES: usize = 16;

pub(super) struct Connection {
    client: Client,
    task: JoinHandle<()>,
    /// The query whose transaction is open, if one is.
    pub(super) open: Option<u64>,
    /// A statement was sent and its answer not read to the end: the call
    /// awaiting it was cut short.
    busy: bool,
    /// The server's encoding is not UTF-8 (nor `SQL_ASCII`): rows are
    /// sized as they will arrive, converted.
    pub(super) convert: bool,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Closes the socket even while an answer is still due.
        self.task.abort();
    }
}

/// The server's own message where there is one; never the URL.
pub(super) fn failed(database: &str, e: &tokio_postgres::Error) -> String {
    let why = e.as_db_error().map_or_else(
        || e.to_string(),
        |db| format!("{}: {}", db.code().code(), db.message()),
    );
    format!("database `{database}`: {why}")
}

/// Whether a name may lead to `ip` for a plugin under a tenant.
fn reachable_by_name(ip: IpAddr) -> Result<(), AddressClass> {
    match classify(ip) {
        Some(
            class @ (AddressClass::Loopback | AddressClass::Unspecified | AddressClass::LinkLocal),
        ) => Err(class),
        _ => Ok(()),
    }
}

/// The client's settings for `target`, each name looked up once and its
/// addresses pinned.
async fn pinned(
    database: &str,
    target: &SqlTarget,
    confined: bool,
    resolver: &dyn Resolve,
) -> Result<Config, String> {
    let mut config = Config::new();
    let mut refused = Vec::new();
    let mut dialled = 0;
    for server in target.servers() {
        let addresses: Vec<IpAddr> = match &server.host {
            Host::Address(ip) => vec![*ip],
            Host::Name(name) => {
                let found = resolver
                    .resolve(name.clone(), server.port)
                    .await
                    .map_err(|e| format!("database `{database}`: cannot look up `{name}`: {e}"))?;
                let mut ips: Vec<IpAddr> = found.iter().map(|a| a.ip()).collect();
                ips.dedup();
                ips.truncate(MAX_ADDRESSES);
                if confined && name != "localhost" {
                    ips.retain(|ip| match reachable_by_name(*ip) {
                        Ok(()) => true,
                        Err(class) => {
                            refused.push(format!("`{name}` leads to {ip}, {}", class.describe()));
                            false
                        }
                    });
                }
                ips
            }
        };
        let name = match &server.host {
            Host::Name(name) => name.clone(),
            Host::Address(ip) => ip.to_string(),
        };
        for ip in addresses {
            config.host(&name).hostaddr(ip).port(server.port);
            dialled += 1;
        }
    }
    if dialled == 0 {
        return Err(format!(
            "database `{database}`: no address to dial ({}); a name may not lead there: grant the address itself",
            refused.join("; ")
        ));
    }
    target.credentials_into(&mut config);
    Ok(config)
}

impl Connection {
    /// Connect to `database` at `target`, within `wait`.
    pub(super) async fn open(
        database: &str,
        target: &SqlTarget,
        confined: bool,
        wait: Duration,
        application: &str,
    ) -> Result<Self, String> {
        let connect = async {
            let mut config = pinned(database, target, confined, &SystemResolver).await?;
            config
                .connect_timeout(wait)
                .application_name(application)
                // Read-only from the start: nothing outside a query's own
                // transaction can write either.
                .options("-c default_transaction_read_only=on");
            let (client, connection) = config
                .connect(NoTls)
                .await
                .map_err(|e| failed(database, &e))?;
            let name = database.to_owned();
            let task = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(database = %name, error = %e, "a plugin's database connection ended");
                }
            });
            let mut connection = Self {
                client,
                task,
                open: None,
                busy: false,
                convert: false,
            };
            if confined {
                connection.may_only_read(database).await?;
            }
            let encoding = connection
                .run(async |c| c.simple_query("SHOW server_encoding").await)
                .await
                .map_err(|e| failed(database, &e))?;
            connection.convert = encoding.iter().any(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => {
                    !matches!(row.try_get(0), Ok(Some("UTF8" | "SQL_ASCII")))
                }
                _ => false,
            });
            Ok(connection)
        };
        tokio::time::timeout(wait, connect)
            .await
            .map_err(|_| format!("database `{database}`: no connection within {wait:?}"))?
    }

    /// Under a tenant, the grant's user may not be one whose reads reach
    /// past the database: a superuser or replication user, a member of the
    /// roles that read or write the server's files, run its programs or
    /// signal other sessions, or one that may call `dblink` (a session of
    /// its own, to any server, that no read-only transaction binds).
    async fn may_only_read(&mut self, database: &str) -> Result<(), String> {
        const POWERS: &str = "SELECT concat_ws(', ', \
             CASE WHEN r.rolsuper THEN 'a superuser' END, \
             CASE WHEN r.rolreplication THEN 'a replication user' END, \
             CASE WHEN pg_has_role(current_user, 'pg_read_server_files', 'USAGE') THEN 'a reader of the server''s files' END, \
             CASE WHEN pg_has_role(current_user, 'pg_write_server_files', 'USAGE') THEN 'a writer of the server''s files' END, \
             CASE WHEN pg_has_role(current_user, 'pg_execute_server_program', 'USAGE') THEN 'a runner of the server''s programs' END, \
             CASE WHEN pg_has_role(current_user, 'pg_signal_backend', 'USAGE') THEN 'a signaller of other sessions' END, \
             CASE WHEN EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname LIKE 'dblink%' \
                  AND has_function_privilege(p.oid, 'EXECUTE')) THEN 'a caller of dblink' END) \
             FROM pg_roles r WHERE r.rolname = current_user";
        let answer = self
            .run(async |c| c.simple_query(POWERS).await)
            .await
            .map_err(|e| failed(database, &e))?;
        let powers = answer.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => {
                row.try_get(0).ok().flatten().map(str::to_owned)
            }
            _ => None,
        });
        match powers.as_deref() {
            Some("") => Ok(()),
            Some(powers) => Err(format!(
                "database `{database}`: the grant's user is {powers}: a tenant's plugin may only read, so grant a role without these"
            )),
            None => Err(format!(
                "database `{database}`: the grant's user is not in pg_roles"
            )),
        }
    }

    /// Whether the connection can take a statement.
    pub(super) fn usable(&self) -> bool {
        !self.client.is_closed() && !self.busy
    }

    /// Run `statement` on the client, marked busy until its answer is in:
    /// a call cut short while it runs leaves the mark for [`Self::end`].
    pub(super) async fn run<T>(
        &mut self,
        statement: impl AsyncFnOnce(&Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, tokio_postgres::Error> {
        self.busy = true;
        let answer = statement(&self.client).await;
        self.busy = false;
        answer
    }

    /// End the open query: cancel a statement still running, roll back.
    /// An error means the connection is not to be used again.
    pub(super) async fn end(&mut self) -> Result<(), tokio_postgres::Error> {
        if self.busy {
            // The answer to a statement of a cut call is still due: the
            // server is told to stop it, and the rollback queues behind it.
            let _ = self.client.cancel_token().cancel_query(NoTls).await;
        }
        if self.open.take().is_some() || self.busy {
            self.client.batch_execute(END_QUERY).await?;
        }
        self.busy = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::net::SocketAddr;

    use super::super::super::http::Lookup;
    use super::*;

    /// Answers every name with `ips`.
    struct Answer(Vec<IpAddr>);

    impl Resolve for Answer {
        fn resolve(&self, _name: String, port: u16) -> Lookup {
            let found: Vec<SocketAddr> =
                self.0.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
            Box::pin(async move { Ok::<_, io::Error>(found) })
        }
    }

    fn dial(
        url: &str,
        confined: bool,
        answer: &[&str],
    ) -> Result<Vec<(String, IpAddr, u16)>, String> {
        let target = SqlTarget::parse(url).expect("a target");
        let answer = Answer(answer.iter().map(|a| a.parse().expect("ip")).collect());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let config = runtime.block_on(pinned("db", &target, confined, &answer))?;
        let hosts = config.get_hosts().iter().map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        });
        Ok(hosts
            .zip(config.get_hostaddrs().iter().copied())
            .zip(config.get_ports().iter().copied())
            .map(|((h, a), p)| (h, a, p))
            .collect())
    }

    #[test]
    fn a_name_is_looked_up_once_and_its_addresses_dialled() {
        let dialled = dial("host=db.a port=7", false, &["10.0.0.5", "10.0.0.6"]).expect("dialled");
        assert_eq!(
            dialled,
            [
                ("db.a".to_owned(), "10.0.0.5".parse().expect("ip"), 7),
                ("db.a".to_owned(), "10.0.0.6".parse().expect("ip"), 7)
            ]
        );
    }

    #[test]
    fn under_a_tenant_a_name_may_not_lead_to_this_machine() {
        for to in [
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "169.254.169.254",
            "::ffff:127.0.0.1",
        ] {
            let why = dial("host=db.a", true, &[to]).expect_err(to);
            assert!(why.contains("a name may not lead there"), "{why}");
        }
        // Private networks are where databases live; the operator's own
        // runs (no tenant) dial what their names say.
        assert!(dial("host=db.a", true, &["10.0.0.5"]).is_ok());
        assert!(dial("host=db.a", false, &["127.0.0.1"]).is_ok());
        // Only the refused addresses are dropped; an address literal is
        // the policy's to allow (admission checked it).
        assert_eq!(
            dial("host=db.a", true, &["127.0.0.1", "10.0.0.5"])
                .expect("one")
                .len(),
            1
        );
        assert!(dial("host=127.0.0.1", true, &[]).is_ok());
    }
}
