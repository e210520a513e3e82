//! A clean run: what a record becomes, per-key order, a record that is not
//! a document dead-lettered with its origin while the others go on, and
//! offsets committed to the end once everything is done.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{PATIENCE, Run, Topic};

#[test]
fn records_become_documents_in_key_order_and_a_bad_one_is_dead_lettered() {
    let topic = Topic::new("ks_delivery", 3);
    let (keys, versions) = (30, 20);
    for v in 0..versions {
        for k in 0..keys {
            let value = format!(r#"{{"key":"k{k}","v":{v},"title":"t{k}"}}"#);
            topic.send(
                Some(&format!("k{k}")),
                value.as_bytes(),
                &[("source", "test")],
            );
        }
        if v == versions / 2 {
            topic.send(Some("bad"), b"not json at all", &[]);
            topic.send(None, br#"{"v":-1}"#, &[]);
        }
    }
    topic.flush();
    let total = keys * versions + 1;

    let run = Run::new(&topic, "", "");
    let mut proc = run.start("run");
    run.wait(
        &mut proc,
        "run",
        "every record indexed, the bad one dead-lettered",
        |r| r.indexed().len() >= total && !r.dead_letters().is_empty(),
    );

    let indexed = run.indexed();
    assert_eq!(indexed.len(), total, "each record once in a clean run");
    // Per key, its versions in the order they were produced.
    let mut seen: HashMap<String, Vec<i64>> = HashMap::new();
    for doc in &indexed {
        let meta = &doc["kafka"];
        assert_eq!(meta["topic"], topic.name.as_str(), "{doc}");
        assert!(
            meta["partition"]
                .as_i64()
                .is_some_and(|p| (0..3).contains(&p)),
            "{doc}"
        );
        assert!(meta["offset"].as_i64().is_some(), "{doc}");
        let id = doc["id"].as_str().expect("id").to_owned();
        if doc["v"] == -1 {
            // No key: its origin is its id.
            let origin = format!("{}/{}/{}", topic.name, meta["partition"], meta["offset"]);
            assert_eq!(id, origin);
            continue;
        }
        assert_eq!(meta["key"], id.as_str());
        assert_eq!(meta["headers"]["source"], "test");
        assert_eq!(doc["title"], format!("t{}", &id[1..]));
        seen.entry(id)
            .or_default()
            .push(doc["v"].as_i64().expect("v"));
    }
    assert_eq!(seen.len(), keys);
    for (key, vs) in &seen {
        assert_eq!(
            *vs,
            (0..versions as i64).collect::<Vec<_>>(),
            "order of {key}"
        );
    }
    let letters = run.dead_letters();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    let origin = letter["id"].as_str().expect("origin");
    assert!(origin.starts_with(&format!("{}/", topic.name)), "{letter}");
    assert_eq!(letter["document"]["origin"], origin);
    assert!(
        letter["error"]
            .as_str()
            .is_some_and(|e| e.contains("not a JSON object")),
        "{letter}"
    );
    assert_eq!(letter["plugin"], "topic");

    // Everything done: the group's offsets reach the end of each partition.
    let records = (total + 1) as i64;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let committed: i64 = topic.committed().values().sum();
        if committed == records {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "committed {committed} of {records}:\n{}",
            run.log("run")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    proc.stop();
    assert!(
        run.log("run").contains("Kafka source closed"),
        "{}",
        run.log("run")
    );
}

/// A tombstone (a key with no value) deletes the document of its key, after
/// the versions before it; its offset is committed once the deletion is
/// indexed.
#[test]
fn a_tombstone_deletes_the_document_of_its_key() {
    let topic = Topic::new("ks_tombstone", 2);
    for k in 0..10 {
        let value = format!(r#"{{"k":{k}}}"#);
        topic.send(Some(&format!("k{k}")), value.as_bytes(), &[]);
    }
    topic.tombstone("k3");
    topic.tombstone("k7");
    topic.flush();
    let run = Run::new(&topic, "", "");
    let mut proc = run.start("run");
    run.wait(&mut proc, "run", "ten documents and two deletions", |r| {
        r.indexed().len() >= 12
    });
    run.wait(&mut proc, "run", "every offset committed", |_| {
        topic.committed().values().sum::<i64>() == 12
    });
    proc.stop();
    // The last line of each id is what the index holds.
    let mut last: HashMap<String, serde_json::Value> = HashMap::new();
    for doc in run.indexed() {
        last.insert(doc["id"].as_str().expect("id").to_owned(), doc);
    }
    let mut deleted: Vec<&str> = last
        .iter()
        .filter(|(_, d)| d["_deleted"] == true)
        .map(|(id, _)| id.as_str())
        .collect();
    deleted.sort_unstable();
    assert_eq!(deleted, ["k3", "k7"], "{last:?}");
    assert_eq!(last.len(), 10);
}
