//! Crashes and rebalances: a run killed with SIGKILL mid-topic had
//! committed only offsets whose records' documents were indexed, and the
//! next run indexes the rest (0 lost, duplicates counted); two runs in one
//! group share the partitions and lose nothing across the rebalance.

use std::collections::{HashMap, HashSet};

use super::{Run, Topic, produce};

/// The origins (`topic/partition/offset`) of the documents indexed.
fn origins(docs: &[serde_json::Value]) -> Vec<String> {
    docs.iter()
        .map(|d| d["id"].as_str().expect("id").to_owned())
        .collect()
}

#[test]
fn a_run_killed_mid_topic_committed_only_what_was_indexed_and_the_next_loses_nothing() {
    let topic = Topic::new("ks_crash", 4);
    let n = 20_000;
    produce(&topic, 0, n);
    // Ids are origins: each record one document; a slow stage keeps the
    // run mid-topic when it is killed.
    let run = Run::new(
        &topic,
        r#", id = "origin""#,
        r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 150 } } }"#,
    );
    let mut first = run.start("first");
    run.wait(&mut first, "first", "a third indexed", |r| {
        r.indexed().len() >= n / 3
    });
    // Past at least one periodic commit.
    run.wait(&mut first, "first", "an offset committed", |_| {
        topic.committed().values().sum::<i64>() > 0
    });
    first.kill_hard();

    let committed = topic.committed();
    let indexed: HashSet<String> = origins(&run.indexed()).into_iter().collect();
    let below: i64 = committed.values().sum();
    assert!(
        below > 0 && (below as usize) < n,
        "committed {below} of {n} at the kill"
    );
    for (&partition, &offset) in &committed {
        for o in 0..offset {
            let origin = format!("{}/{partition}/{o}", topic.name);
            assert!(
                indexed.contains(&origin),
                "offset {offset} of partition {partition} was committed, but {origin} was never indexed"
            );
        }
    }

    let mut second = run.start("second");
    run.wait(&mut second, "second", "every record indexed", |r| {
        origins(&r.indexed())
            .into_iter()
            .collect::<HashSet<_>>()
            .len()
            >= n
    });
    second.stop();
    let all = origins(&run.indexed());
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), n, "0 lost");
    eprintln!(
        "kill -9 mid-topic: {n} records, {} indexed before the kill, {} committed, {} duplicates after the rerun",
        indexed.len(),
        below,
        all.len() - n
    );
}

#[test]
fn two_runs_in_one_group_share_the_partitions_and_lose_nothing() {
    let topic = Topic::new("ks_group", 6);
    let n = 6_000;
    produce(&topic, 0, n / 2);
    let slow =
        r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 200 } } }"#;
    let (a, b) = (Run::new(&topic, "", slow), Run::new(&topic, "", slow));
    let mut run_a = a.start("a");
    a.wait(&mut run_a, "a", "the first run under way", |r| {
        !r.indexed().is_empty()
    });
    let mut run_b = b.start("b");
    b.wait(
        &mut run_b,
        "b",
        "partitions assigned to the second run",
        |r| r.log("b").contains("partitions assigned"),
    );
    produce(&topic, n / 2, n);
    let both = |_: &Run| {
        let mut ns: HashSet<i64> = HashSet::new();
        for run in [&a, &b] {
            ns.extend(run.indexed().iter().filter_map(|d| d["n"].as_i64()));
        }
        ns.len() >= n
    };
    a.wait(
        &mut run_a,
        "a",
        "every record indexed by one run or the other",
        both,
    );
    run_a.stop();
    run_b.stop();
    let mut count: HashMap<i64, usize> = HashMap::new();
    let mut per_run = Vec::new();
    for run in [&a, &b] {
        let ns: Vec<i64> = run
            .indexed()
            .iter()
            .filter_map(|d| d["n"].as_i64())
            .collect();
        per_run.push(ns.iter().filter(|&&x| x >= (n / 2) as i64).count());
        for x in ns {
            *count.entry(x).or_default() += 1;
        }
    }
    assert_eq!(count.len(), n, "0 lost");
    assert!(
        per_run.iter().all(|&c| c > 0),
        "both runs took records of the second half: {per_run:?}"
    );
    let duplicates: usize = count.values().map(|c| c - 1).sum();
    eprintln!(
        "two runs in one group: {n} records, {per_run:?} of the second half each, {duplicates} duplicates"
    );
}
