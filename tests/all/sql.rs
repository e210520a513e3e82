//! The sql-connector against a real PostgreSQL (Debian's package, through
//! the host's `sql` interface): a first sync indexes every row; a change, an
//! addition, a soft delete and a hard delete in the table; a second sync
//! sends exactly those; kill -9 mid-sync loses nothing and deletes nothing
//! wrongly; what a plugin may not do with a database is refused.

use std::collections::BTreeSet;

use weir_tests::{postgres_settings, postgres_url};

use crate::sync::{SLOW, Sync, kill_once_committed, summary_of};

fn db() -> postgres::Client {
    postgres::Client::connect(postgres_url(), postgres::NoTls)
        .expect("connect to the test PostgreSQL")
}

/// A table of its own, `rows` rows, each changed one second after the last.
fn table(client: &mut postgres::Client, rows: i64) -> String {
    let name = format!("items_{:08x}", fastrand::u32(..));
    client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id bigint PRIMARY KEY, title text, price numeric(10,2), tags jsonb, \
             data bytea, updated_at timestamptz NOT NULL, deleted boolean NOT NULL DEFAULT false);
             INSERT INTO {name} (id, title, price, tags, data, updated_at)
             SELECT i, 'title ' || i, i * 1.25, jsonb_build_object('n', i), '\\x00ff'::bytea,
                    timestamptz '2026-01-01 00:00:00+00' + i * interval '1 second'
             FROM generate_series(1, {rows}) AS i;"
        ))
        .expect("table");
    name
}

fn connector(table: &str, extra: &str) -> String {
    format!(
        r#"{{ path = @sql-connector, config = {{ query = "SELECT * FROM {table} WHERE (updated_at, id) > ($1::timestamptz, $2::bigint) ORDER BY updated_at, id", id_column = "id", id_prefix = "row:", cursor_columns = ["updated_at", "id"], cursor_start = ["-infinity", "0"], deleted_column = "deleted", keys_query = "SELECT id FROM {table}", page_size = 7 {extra} }}, grants = {{ sql = {{ main = "{}" }} }} }}"#,
        postgres_settings()
    )
}

#[test]
fn a_second_sql_sync_sends_exactly_the_changes_and_both_kinds_of_delete() {
    let mut client = db();
    let table = table(&mut client, 50);
    let sync = Sync::new(&connector(&table, ""), "");
    assert_eq!(sync.run(&[]), 0);
    let first = sync.indexed();
    assert_eq!(first.len(), 50, "every row, over several pages of 7");
    let row = first.iter().find(|l| l["id"] == "row:8").expect("row 8");
    assert_eq!(row["title"], "title 8");
    assert_eq!(row["price"], "10.00", "numeric exact, as text");
    assert_eq!(row["tags"]["n"], 8, "jsonb as JSON");
    assert_eq!(row["data"], "AP8=", "bytea in base64");
    assert_eq!(row["deleted"], false);
    assert!(row.get("_deleted").is_none());

    client
        .batch_execute(&format!(
            "UPDATE {table} SET title = 'changed', updated_at = '2027-01-01' WHERE id = 7;
             INSERT INTO {table} (id, title, updated_at) VALUES (1000, 'added', '2027-01-02');
             UPDATE {table} SET deleted = true, updated_at = '2027-01-03' WHERE id = 20;
             DELETE FROM {table} WHERE id = 30;"
        ))
        .expect("changes");
    assert_eq!(sync.run(&[]), 0);
    let second: BTreeSet<(String, String)> = summary_of(&sync.indexed()[50..], "title")
        .into_iter()
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("row:7", "changed"),
        ("row:1000", "added"),
        ("row:20", "DELETED"),
        ("row:30", "DELETED"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(sync.indexed().len(), 54, "{second:?}");
    assert_eq!(second, expected);
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), 54, "nothing changed: nothing sent");
}

#[test]
fn kill_minus_nine_mid_sql_sync_loses_nothing_and_deletes_nothing_wrongly() {
    let mut client = db();
    let total = 1500;
    let table = table(&mut client, total);
    let sync = Sync::new(&connector(&table, ""), SLOW);
    let (first, kept) = kill_once_committed(&sync, 100);
    assert!(first.len() < total as usize, "killed mid-sync");
    assert!(
        kept <= first.len() + 1,
        "state never runs ahead of the index"
    );
    // The killed run did not end cleanly, so the next one is a full sync:
    // every row sent again, and its sweep leaves the file holding each row
    // once, nothing deleted.
    assert_eq!(sync.run(&[]), 0);
    let after = summary_of(&sync.indexed(), "title");
    assert!(
        after.iter().all(|(_, t)| t != "DELETED"),
        "nothing deleted wrongly"
    );
    let ids: BTreeSet<&String> = after.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), total as usize, "every row indexed");
    assert_eq!(after.len(), total as usize, "each once, after the sweep");
}

#[test]
fn a_plugin_reads_only_granted_databases_and_never_writes() {
    let mut client = db();
    let table = table(&mut client, 3);
    let run = |config: &str| Sync::new(config, "").run(&[]);
    let ungranted = connector(&table, r#", database = "other""#);
    assert_ne!(run(&ungranted), 0, "a database not in grants.sql");
    let writing = connector(&table, "").replace(
        &format!("SELECT * FROM {table} WHERE"),
        &format!("WITH gone AS (DELETE FROM {table} RETURNING *) SELECT * FROM gone WHERE"),
    );
    assert_ne!(
        run(&writing),
        0,
        "a read-only transaction refuses the delete"
    );
    let bad = connector(&table, "").replace("SELECT * FROM", "SELEKT * FROM");
    assert_ne!(run(&bad), 0, "a syntax error stops the run");
    let count: i64 = client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .expect("count")
        .get(0);
    assert_eq!(count, 3, "the table is as it was");
}
