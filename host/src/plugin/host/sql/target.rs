//! Where a `grants.sql` connection URL leads, read once.
//!
//! A PostgreSQL connection string can name a server in more ways than its
//! host: `hostaddr` (the address actually dialled, whatever the host says),
//! repeated `host=` and `port=` settings, Unix socket directories, and
//! `options` (server settings such as `role`, which change as whom the
//! session acts). Checking the host names and then handing the string to
//! the client let a tenant name an allowed host and connect elsewhere.
//!
//! So the string is parsed once, by the client library itself, into a
//! [`SqlTarget`]: the TCP servers it will try (host and port, paired), the
//! user, password and database. Settings that change where or as whom it
//! connects and cannot be expressed that way are refused. Admission checks
//! [`SqlTarget::servers`], and the connection is built from the target
//! alone ([`SqlTarget::connect_config`]), so what was checked is exactly
//! what is dialled.

use std::fmt;
use std::time::Duration;

use tokio_postgres::config::{Config, Host as PgHost};

use super::super::http::Host;

/// One server a target tries: a host name or an address, and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SqlServer {
    /// As the client dials it: a name (lower case, no trailing dot) or an
    /// address.
    pub(crate) host: Host,
    pub(crate) port: u16,
}

impl fmt::Display for SqlServer {
    /// `host:port`, an IPv6 address in brackets: the form of a policy entry.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(name) => write!(f, "{name}:{}", self.port),
            Host::Address(ip) if ip.is_ipv6() => write!(f, "[{ip}]:{}", self.port),
            Host::Address(ip) => write!(f, "{ip}:{}", self.port),
        }
    }
}

/// What a `grants.sql` URL connects to, and as whom.
#[derive(Clone)]
pub(crate) struct SqlTarget {
    servers: Vec<SqlServer>,
    user: Option<String>,
    password: Option<Vec<u8>>,
    dbname: Option<String>,
    connect_timeout: Option<Duration>,
}

/// Why a `grants.sql` URL is refused. Never carries the URL (its password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SqlTargetError {
    #[error("is not a PostgreSQL connection URL ({0})")]
    NotAUrl(String),
    #[error("names no host (a socket of the server's own is not a plugin's)")]
    NoHost,
    #[error("names a Unix socket: a plugin's database is reached over TCP")]
    UnixSocket,
    #[error(
        "sets `hostaddr`, the address dialled whatever the host says: name the server in the host instead"
    )]
    HostAddr,
    #[error(
        "sets `options` (server settings such as `role` change as whom the session acts): set them on the database's user instead"
    )]
    Options,
    #[error("names {hosts} hosts and {ports} ports: give one port for all, or one for each host")]
    Ports { hosts: usize, ports: usize },
    #[error("names {0} servers; at most {MAX_SERVERS} may be tried")]
    TooMany(usize),
    #[error(
        "asks for TLS (`sslmode=require` or `channel_binding=require`), which the host does not speak to databases yet: it would not connect in clear text instead"
    )]
    Tls,
}

/// Most servers one URL may list (each is tried in turn on connecting).
const MAX_SERVERS: usize = 16;

impl SqlTarget {
    /// Read `url` (a `postgres://` URL or `key=value` settings) as the
    /// client would, refusing what leads anywhere but its TCP hosts.
    pub(crate) fn parse(url: &str) -> Result<Self, SqlTargetError> {
        let config: Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| SqlTargetError::NotAUrl(e.to_string()))?;
        if !config.get_hostaddrs().is_empty() {
            return Err(SqlTargetError::HostAddr);
        }
        if config.get_options().is_some() {
            return Err(SqlTargetError::Options);
        }
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require
            || config.get_channel_binding() == tokio_postgres::config::ChannelBinding::Require
        {
            return Err(SqlTargetError::Tls);
        }
        let hosts = config.get_hosts();
        let ports = config.get_ports();
        if hosts.is_empty() {
            return Err(SqlTargetError::NoHost);
        }
        if hosts.len() > MAX_SERVERS {
            return Err(SqlTargetError::TooMany(hosts.len()));
        }
        if ports.len() > 1 && ports.len() != hosts.len() {
            return Err(SqlTargetError::Ports {
                hosts: hosts.len(),
                ports: ports.len(),
            });
        }
        let servers = hosts
            .iter()
            .enumerate()
            .map(|(i, host)| match host {
                PgHost::Tcp(name) if !name.is_empty() => Ok(SqlServer {
                    host: Host::parse(name),
                    port: ports.get(i).or(ports.first()).copied().unwrap_or(5432),
                }),
                PgHost::Tcp(_) => Err(SqlTargetError::NoHost),
                #[cfg(unix)]
                PgHost::Unix(_) => Err(SqlTargetError::UnixSocket),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            servers,
            user: config.get_user().map(str::to_owned),
            password: config.get_password().map(<[u8]>::to_vec),
            dbname: config.get_dbname().map(str::to_owned),
            connect_timeout: config.get_connect_timeout().copied(),
        })
    }

    /// The servers tried on connecting, in order.
    /// Where it connects and as whom, without the password: which
    /// database a grant reads (`user@host:port,.../dbname`).
    pub(crate) fn identity(&self) -> String {
        let servers: Vec<String> = self.servers.iter().map(ToString::to_string).collect();
        format!(
            "{}@{}/{}",
            self.user.as_deref().unwrap_or_default(),
            servers.join(","),
            self.dbname.as_deref().unwrap_or_default()
        )
    }

    pub(crate) fn servers(&self) -> &[SqlServer] {
        &self.servers
    }

    /// The client's settings by name (for tests: the host dials pinned
    /// addresses, `connection.rs`), made from the target alone: its servers
    /// (each with its own port), user, password and database. Nothing else
    /// of the URL reaches the client.
    #[cfg(test)]
    pub(crate) fn connect_config(&self) -> Config {
        let mut config = Config::new();
        for server in &self.servers {
            match &server.host {
                Host::Name(name) => config.host(name),
                Host::Address(ip) => config.host(ip.to_string()),
            };
            config.port(server.port);
        }
        self.credentials_into(&mut config);
        config
    }

    /// Set the target's user, password, database and connect timeout on
    /// `config`.
    pub(crate) fn credentials_into(&self, config: &mut Config) {
        if let Some(user) = &self.user {
            config.user(user);
        }
        if let Some(password) = &self.password {
            config.password(password);
        }
        if let Some(dbname) = &self.dbname {
            config.dbname(dbname);
        }
        if let Some(timeout) = self.connect_timeout {
            config.connect_timeout(timeout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(url: &str) -> Vec<String> {
        SqlTarget::parse(url)
            .expect(url)
            .servers()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn every_way_of_naming_servers_is_read_as_the_client_reads_it() {
        assert_eq!(servers("postgres://u:p@db.a/x"), ["db.a:5432"]);
        assert_eq!(servers("postgres://u:p@DB.A.:6432/x"), ["db.a:6432"]);
        assert_eq!(
            servers("postgresql://u@h1:1,h2:2/x?host=h3&port=3"),
            ["h1:1", "h2:2", "h3:3"]
        );
        assert_eq!(servers("host=h1,h2 port=7"), ["h1:7", "h2:7"]);
        assert_eq!(servers("postgres://[::1]:5/x"), ["[::1]:5"]);
        assert_eq!(servers("postgres://%31%32%37.0.0.1/x"), ["127.0.0.1:5432"]);
        assert_eq!(
            servers("postgres://[::ffff:127.0.0.1]/x"),
            ["127.0.0.1:5432"]
        );
    }

    #[test]
    fn what_leads_elsewhere_is_refused() {
        for (url, error) in [
            (
                "postgres://u@db.a/x?hostaddr=127.0.0.1",
                SqlTargetError::HostAddr,
            ),
            ("host=db.a hostaddr=10.0.0.1", SqlTargetError::HostAddr),
            ("hostaddr=10.0.0.1", SqlTargetError::HostAddr),
            (
                "postgres://u@db.a/x?options=-c%20role%3Dadmin",
                SqlTargetError::Options,
            ),
            ("postgres://u@%2Fvar%2Frun/x", SqlTargetError::UnixSocket),
            ("host=/tmp port=5432", SqlTargetError::UnixSocket),
            ("user=u", SqlTargetError::NoHost),
            ("host=h sslmode=require", SqlTargetError::Tls),
            (
                "postgres://u@h/x?channel_binding=require",
                SqlTargetError::Tls,
            ),
            (
                "host=a,b,c port=1,2",
                SqlTargetError::Ports { hosts: 3, ports: 2 },
            ),
        ] {
            assert_eq!(SqlTarget::parse(url).err(), Some(error), "{url}");
        }
        let many = format!("host={}", vec!["h"; 17].join(","));
        assert_eq!(
            SqlTarget::parse(&many).err(),
            Some(SqlTargetError::TooMany(17))
        );
        assert!(matches!(
            SqlTarget::parse("postgres://u@h/x?service=other"),
            Err(SqlTargetError::NotAUrl(_))
        ));
    }

    #[test]
    fn the_connection_is_made_from_the_target_alone() {
        let target =
            SqlTarget::parse("postgres://u:p%40ss@h1,h2:7/db?application_name=x&connect_timeout=3")
                .expect("parsed");
        let config = target.connect_config();
        assert!(config.get_hostaddrs().is_empty());
        assert_eq!(config.get_ports(), [5432, 7]);
        assert_eq!(config.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(config.get_dbname(), Some("db"));
        assert_eq!(config.get_user(), Some("u"));
        assert_eq!(config.get_application_name(), None);
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(3)));
    }
}
