//! The host's cache on disk: one SQLite file per tenant, a table of
//! entries (key, value, size, last use) and a row of totals kept by
//! triggers, so the bounds are checked without counting the table.
//!
//! Several processes of one run (`weir run` and its Kafka-mode workers on
//! the machine) open the same file: SQLite's write-ahead log lets them read
//! while one writes, and a write waits at most [`BUSY_WAIT`] for another's.
//! Eviction is least recently used first: a `get` that finds entries marks
//! them used (at most once a [`TOUCH_EVERY_MS`] per entry, so hot entries
//! do not make a write of every read).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

/// Longest a call waits for another process's write before it gives up
/// (and the plugin goes on without the cache for that call).
pub(crate) const BUSY_WAIT: Duration = Duration::from_secs(2);

/// An entry read is marked used again only when its mark is older than this.
const TOUCH_EVERY_MS: i64 = 1_000;

/// Where the host's cache is, and how much it may keep (`[cache]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCacheOptions {
    /// The SQLite file, made when a plugin first uses the cache.
    pub path: PathBuf,
    /// Most entries kept; past it the least recently used are removed.
    pub max_entries: u64,
    /// Most bytes kept (keys and values); past it the least recently used
    /// entries are removed.
    pub max_bytes: u64,
}

/// Why a call could not be served.
#[derive(Debug)]
pub(crate) struct StoreError {
    pub(crate) message: String,
    /// The file is no database (or a broken one): no later call will do
    /// better, so the cache is not tried again by this process.
    pub(crate) broken: bool,
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        let broken = matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
        );
        Self {
            message: e.to_string(),
            broken,
        }
    }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        Self {
            message: e.to_string(),
            broken: false,
        }
    }
}

/// What a `put` removed to stay within the bounds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Evicted {
    /// Entries removed, in all.
    pub(crate) entries: u64,
    /// Whether `max_entries` removed some.
    pub(crate) by_entries: bool,
    /// Whether `max_bytes` removed some.
    pub(crate) by_bytes: bool,
}

/// An open cache file.
pub(crate) struct Store {
    db: Connection,
}

const SCHEMA: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    CREATE TABLE IF NOT EXISTS entries (
        key TEXT NOT NULL UNIQUE,
        value BLOB NOT NULL,
        bytes INTEGER NOT NULL,
        used INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS entries_by_use ON entries (used);
    CREATE TABLE IF NOT EXISTS totals (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        entries INTEGER NOT NULL,
        bytes INTEGER NOT NULL
    );
    INSERT OR IGNORE INTO totals VALUES (0, 0, 0);
    CREATE TRIGGER IF NOT EXISTS entries_added AFTER INSERT ON entries BEGIN
        UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.bytes WHERE id = 0;
    END;
    CREATE TRIGGER IF NOT EXISTS entries_removed AFTER DELETE ON entries BEGIN
        UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE id = 0;
    END;
    CREATE TRIGGER IF NOT EXISTS entries_replaced AFTER UPDATE OF bytes ON entries BEGIN
        UPDATE totals SET bytes = bytes - OLD.bytes + NEW.bytes WHERE id = 0;
    END;
";

impl Store {
    /// Open (or make) the file at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let db = Connection::open(path)?;
        db.busy_timeout(BUSY_WAIT)?;
        db.execute_batch(SCHEMA)?;
        Ok(Self { db })
    }

    /// The value of each of `keys` (none when not kept), and those found
    /// marked used at `now` (milliseconds). At most `max_answer` bytes of
    /// values: past them, keys answer none.
    pub(crate) fn get(
        &mut self,
        keys: &[String],
        now: i64,
        max_answer: usize,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut found = Vec::with_capacity(keys.len());
        let mut answered = 0usize;
        {
            let mut select = self
                .db
                .prepare_cached("SELECT value FROM entries WHERE key = ?1")?;
            for key in keys {
                let value: Option<Vec<u8>> = select.query_row([key], |r| r.get(0)).optional()?;
                let value = value.filter(|v| {
                    answered = answered.saturating_add(v.len());
                    answered <= max_answer
                });
                found.push(value);
            }
        }
        if found.iter().any(Option::is_some) {
            // Marking is an optimisation of eviction: a write another
            // process holds makes it wait for the next read, not fail this one.
            let _ = self.touch(keys, &found, now);
        }
        Ok(found)
    }

    fn touch(
        &mut self,
        keys: &[String],
        found: &[Option<Vec<u8>>],
        now: i64,
    ) -> rusqlite::Result<()> {
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut mark =
                tx.prepare_cached("UPDATE entries SET used = ?2 WHERE key = ?1 AND used < ?3")?;
            for (key, _) in keys.iter().zip(found).filter(|(_, v)| v.is_some()) {
                mark.execute(params![key, now, now - TOUCH_EVERY_MS])?;
            }
        }
        tx.commit()
    }

    /// Keep `entries` (each replacing what its key held), marked used at
    /// `now`, then remove the least recently used entries past the bounds.
    pub(crate) fn put(
        &mut self,
        entries: &[(&str, &[u8])],
        now: i64,
        max_entries: u64,
        max_bytes: u64,
    ) -> Result<Evicted, StoreError> {
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut upsert = tx.prepare_cached(
                "INSERT INTO entries (key, value, bytes, used) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value,
                     bytes = excluded.bytes, used = excluded.used",
            )?;
            for (key, value) in entries {
                let bytes = i64::try_from(key.len() + value.len()).unwrap_or(i64::MAX);
                upsert.execute(params![key, value, bytes, now])?;
            }
        }
        let evicted = evict(&tx, max_entries, max_bytes)?;
        tx.commit()?;
        Ok(evicted)
    }

    /// How many entries and bytes the cache holds.
    #[cfg(test)]
    pub(crate) fn totals(&self) -> Result<(u64, u64), StoreError> {
        Ok(totals(&self.db)?)
    }
}

fn totals(db: &Connection) -> rusqlite::Result<(u64, u64)> {
    db.query_row("SELECT entries, bytes FROM totals WHERE id = 0", [], |r| {
        let (n, b): (i64, i64) = (r.get(0)?, r.get(1)?);
        Ok((n.max(0).cast_unsigned(), b.max(0).cast_unsigned()))
    })
}

/// Remove the least recently used entries until both bounds hold.
fn evict(db: &Connection, max_entries: u64, max_bytes: u64) -> rusqlite::Result<Evicted> {
    let mut out = Evicted::default();
    let mut remove = db.prepare_cached(
        "DELETE FROM entries WHERE rowid IN
             (SELECT rowid FROM entries ORDER BY used, rowid LIMIT ?1)",
    )?;
    loop {
        let (entries, bytes) = totals(db)?;
        let over_entries = entries.saturating_sub(max_entries);
        let over_bytes = bytes.saturating_sub(max_bytes);
        if over_entries == 0 && over_bytes == 0 {
            return Ok(out);
        }
        // Enough entries of the average size to cover the bytes over,
        // and at least one: the loop ends once the bounds hold.
        let average = bytes / entries.max(1);
        let for_bytes = over_bytes.div_ceil(average.max(1));
        let n = over_entries.max(for_bytes).max(1);
        let removed = remove.execute([i64::try_from(n).unwrap_or(i64::MAX)])? as u64;
        out.entries += removed;
        out.by_entries |= over_entries > 0;
        out.by_bytes |= over_bytes > 0;
        if removed == 0 {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn entries_are_kept_replaced_and_evicted_least_recently_used_first() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("nested").join("cache.sqlite");
        let mut store = Store::open(&path).expect("open");
        let evicted = store
            .put(&[("a", b"1"), ("b", b"22"), ("c", b"333")], 1, 3, 1 << 20)
            .expect("put");
        assert_eq!(evicted, Evicted::default());
        assert_eq!(store.totals().expect("totals"), (3, 3 + 6));
        // `a` read at 5_000: `b` is now the least recently used.
        let got = store.get(&keys(&["a", "x"]), 5_000, 1 << 20).expect("get");
        assert_eq!(got, vec![Some(b"1".to_vec()), None]);
        let evicted = store.put(&[("d", b"4")], 6_000, 3, 1 << 20).expect("put");
        assert_eq!(evicted.entries, 1);
        assert!(evicted.by_entries && !evicted.by_bytes);
        let got = store
            .get(&keys(&["a", "b", "c", "d"]), 7_000, 1 << 20)
            .expect("get");
        assert_eq!(
            got.iter().map(Option::is_some).collect::<Vec<_>>(),
            [true, false, true, true]
        );
        // Replacing a value counts its new size, not both.
        store
            .put(&[("a", b"11111")], 8_000, 3, 1 << 20)
            .expect("put");
        assert_eq!(store.totals().expect("totals"), (3, 6 + 4 + 2));
        // The byte bound removes as many of the oldest as it takes.
        let evicted = store.put(&[("e", b"5")], 9_000, 10, 8).expect("put");
        assert!(evicted.by_bytes);
        let (entries, bytes) = store.totals().expect("totals");
        assert!(bytes <= 8 && entries >= 1, "{entries} {bytes}");
        let got = store.get(&keys(&["e"]), 10_000, 1 << 20).expect("get");
        assert_eq!(got, vec![Some(b"5".to_vec())], "the newest stays");
    }

    #[test]
    fn an_answer_is_bounded_and_two_handles_on_one_file_share_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cache.sqlite");
        let mut one = Store::open(&path).expect("open");
        let mut two = Store::open(&path).expect("open again");
        one.put(&[("a", &[1; 10]), ("b", &[2; 10])], 1, 10, 1 << 20)
            .expect("put");
        let got = two.get(&keys(&["a", "b"]), 2, 15).expect("get");
        assert_eq!(got, vec![Some(vec![1; 10]), None], "over 15 bytes: a miss");
        two.put(&[("c", b"3")], 3, 10, 1 << 20).expect("put");
        assert_eq!(one.totals().expect("totals"), (3, 3 + 21));
    }

    #[test]
    fn a_file_that_is_no_database_is_broken() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cache.sqlite");
        std::fs::write(&path, vec![b'x'; 8192]).expect("write");
        let error = Store::open(&path).err().expect("not a database");
        assert!(error.broken, "{}", error.message);
    }
}
