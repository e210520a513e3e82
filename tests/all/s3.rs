//! The s3-connector against a real S3-compatible server (S3Proxy, checking
//! signatures): a first sync indexes every object under the prefix; a
//! change, an addition and a deletion in the bucket; a second sync sends
//! exactly those; kill -9 mid-sync loses nothing and deletes nothing wrongly.

use std::collections::BTreeSet;

use base64::Engine;
use weir_tests::s3::{ACCESS_KEY, Client, SECRET_KEY};
use weir_tests::{http_grants, s3_url};

use crate::sync::{SLOW, Sync, kill_once_committed, summary_of};

/// A bucket of its own for each test.
fn bucket(client: &Client) -> String {
    let name = format!("weir-{:08x}", fastrand::u32(..));
    client.create_bucket(&name);
    name
}

fn connector(bucket: &str, extra: &str) -> String {
    format!(
        r#"{{ path = @s3-connector, config = {{ endpoint = "{}", bucket = "{bucket}", prefix = "docs/", id_prefix = "s3:" {extra} }}, grants = {{ http = {}, env = {{ AWS_ACCESS_KEY_ID = "{ACCESS_KEY}", AWS_SECRET_ACCESS_KEY = "{SECRET_KEY}" }} }} }}"#,
        s3_url(),
        http_grants(s3_url())
    )
}

fn decoded(line: &serde_json::Value) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(line["content"].as_str().expect("content"))
        .expect("base64");
    String::from_utf8(bytes).expect("text")
}

#[test]
fn a_second_s3_sync_sends_exactly_the_change_the_addition_and_the_delete() {
    let client = Client::new(s3_url());
    let bucket = bucket(&client);
    for i in 0..30 {
        client.put(
            &bucket,
            &format!("docs/{i:03}.txt"),
            format!("body {i}").as_bytes(),
        );
    }
    client.put(&bucket, "docs/folder/", b"");
    client.put(&bucket, "other/outside.txt", b"not under the prefix");
    client.put(&bucket, "docs/a key & ü.txt", b"odd key");
    let sync = Sync::new(&connector(&bucket, ""), "");
    assert_eq!(sync.run(&[]), 0);
    let first = sync.indexed();
    assert_eq!(
        first.len(),
        31,
        "every object under the prefix, folder markers apart"
    );
    let odd = first
        .iter()
        .find(|l| l["id"] == "s3:docs/a key & ü.txt")
        .expect("an odd key, signed and listed right");
    assert_eq!(decoded(odd), "odd key");
    assert_eq!(odd["size"], 7);
    assert_eq!(odd["bucket"], bucket.as_str());
    assert!(
        odd["etag"]
            .as_str()
            .is_some_and(|e| !e.is_empty() && !e.contains('"'))
    );
    assert_eq!(sync.committed(), 31);

    client.put(&bucket, "docs/007.txt", b"changed");
    client.put(&bucket, "docs/new.txt", b"added");
    client.delete(&bucket, "docs/020.txt");
    assert_eq!(sync.run(&[]), 0);
    let second = &sync.indexed()[31..];
    let sent: BTreeSet<(String, String)> = second
        .iter()
        .map(|l| {
            let id = l["id"].as_str().unwrap_or_default().to_owned();
            match l["_deleted"].as_bool() {
                Some(true) => (id, "DELETED".to_owned()),
                _ => (id, decoded(l)),
            }
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("s3:docs/007.txt", "changed"),
        ("s3:docs/new.txt", "added"),
        ("s3:docs/020.txt", "DELETED"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(second.len(), 3, "{sent:?}");
    assert_eq!(sent, expected);

    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), 34, "nothing changed: nothing sent");
    // The index matches the bucket: what was indexed last per id, deletes
    // applied, is what the bucket holds under the prefix.
    let mut index = std::collections::BTreeMap::new();
    for line in sync.indexed() {
        let id = line["id"].as_str().unwrap_or_default().to_owned();
        if line["_deleted"] == true {
            index.remove(&id);
        } else {
            index.insert(id, decoded(&line));
        }
    }
    let listed: BTreeSet<String> = client
        .keys(&bucket, "docs/", 7)
        .into_iter()
        .filter(|k| !k.ends_with('/'))
        .map(|k| format!("s3:{k}"))
        .collect();
    assert_eq!(index.keys().cloned().collect::<BTreeSet<_>>(), listed);
    assert_eq!(index["s3:docs/007.txt"], "changed");
}

#[test]
fn large_objects_are_cut_at_the_limit_and_text_content_is_text() {
    let client = Client::new(s3_url());
    let bucket = bucket(&client);
    client.put(&bucket, "docs/big.txt", &vec![b'x'; (1 << 20) + 10]);
    client.put(&bucket, "docs/small.txt", "héllo".as_bytes());
    let sync = Sync::new(
        &connector(&bucket, r#", content = "text", max_object_mib = 1"#),
        "",
    );
    assert_eq!(sync.run(&[]), 0);
    let lines = sync.indexed();
    let by_id = |id: &str| lines.iter().find(|l| l["id"] == id).expect("indexed");
    let big = by_id("s3:docs/big.txt");
    assert_eq!(big["content"].as_str().map(str::len), Some(1 << 20));
    assert_eq!(big["content_truncated"], true);
    assert_eq!(big["size"], (1 << 20) + 10);
    let small = by_id("s3:docs/small.txt");
    assert_eq!(small["content"], "héllo");
    assert!(small.get("content_truncated").is_none());
}

#[test]
fn a_wrong_key_or_a_missing_bucket_stops_the_run_with_s3s_reason() {
    let client = Client::new(s3_url());
    let bucket = bucket(&client);
    client.put(&bucket, "docs/a.txt", b"a");
    let wrong = connector(&bucket, "").replace(SECRET_KEY, "not-the-secret");
    let sync = Sync::new(&wrong, "");
    assert_ne!(sync.run(&[]), 0);
    assert!(sync.indexed().is_empty());
    let missing = connector("weir-no-such-bucket", "");
    let sync = Sync::new(&missing, "");
    assert_ne!(sync.run(&[]), 0);
}

#[test]
fn kill_minus_nine_mid_s3_sync_loses_nothing_and_deletes_nothing_wrongly() {
    let client = Client::new(s3_url());
    let bucket = bucket(&client);
    let total = 1500;
    for i in 0..total {
        client.put(&bucket, &format!("docs/{i:05}"), format!("v{i}").as_bytes());
    }
    let sync = Sync::new(&connector(&bucket, r#", content = "text""#), SLOW);
    let (first, kept) = kill_once_committed(&sync, 100);
    assert!(first.len() < total, "killed mid-sync");
    assert!(kept <= first.len(), "state never runs ahead of the index");
    // The killed run did not end cleanly, so the next one is a full sync:
    // every object fetched again, and its sweep leaves the file holding
    // each object once, nothing deleted.
    assert_eq!(sync.run(&[]), 0);
    let after = summary_of(&sync.indexed(), "content");
    assert!(
        after.iter().all(|(_, c)| c != "DELETED"),
        "nothing deleted wrongly"
    );
    let ids: BTreeSet<&String> = after.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), total, "every object indexed");
    assert!(
        after.iter().all(|(id, c)| id
            .strip_prefix("s3:docs/")
            .and_then(|n| n.parse::<u32>().ok())
            == c.strip_prefix('v').and_then(|n| n.parse().ok())),
        "each object holds its own content"
    );
    assert_eq!(sync.indexed().len(), total, "each once, after the sweep");
    assert_eq!(sync.committed(), total);
}
