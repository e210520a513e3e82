//! A paused run (SIGUSR1) reads nothing of its topic however long the
//! pause, past the consumer's `max.poll.interval.ms` and session: the
//! group keeps it as a member (no rebalance, nothing read twice), and once
//! resumed (SIGUSR2) it indexes what was produced meanwhile, each record
//! once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::{Run, Topic, produce};

#[test]
fn a_run_paused_past_the_poll_interval_keeps_its_partitions_and_reads_each_record_once() {
    const POLL_INTERVAL: Duration = Duration::from_secs(7);
    let topic = Topic::new("ks_pause", 3);
    let n = 2_000;
    produce(&topic, 0, n / 2);
    let run = Run::with_properties(
        &topic,
        r#", id = "origin""#,
        "",
        &format!(
            r#", "max.poll.interval.ms" = "{}""#,
            POLL_INTERVAL.as_millis()
        ),
    );
    let mut proc = run.start("paused");
    run.wait(&mut proc, "paused", "the first half indexed", |r| {
        r.indexed().len() >= n / 2
    });
    proc.signal("USR1");
    run.wait(&mut proc, "paused", "the source paused", |r| {
        r.log("paused").contains("its partitions are not read")
    });
    produce(&topic, n / 2, n);
    // Paused for longer than the poll interval and the session together
    // (the length of the pause is the scenario, not a wait for something):
    // nothing is read meanwhile.
    let paused = Instant::now();
    while paused.elapsed() < POLL_INTERVAL * 2 + Duration::from_secs(2) {
        assert_eq!(run.indexed().len(), n / 2, "nothing indexed while paused");
        assert!(
            matches!(proc.child.try_wait(), Ok(None)),
            "the run ended while paused:\n{}",
            run.log("paused")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    proc.signal("USR2");
    run.wait(
        &mut proc,
        "paused",
        "every record indexed after the resume",
        |r| r.indexed().len() >= n,
    );
    // Before the stop, whose unsubscribe revokes the partitions.
    let log = run.log("paused");
    proc.stop();
    let ids: Vec<String> = run
        .indexed()
        .iter()
        .map(|d| d["id"].as_str().expect("id").to_owned())
        .collect();
    let distinct: HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), n, "0 lost:\n{log}");
    assert_eq!(ids.len(), n, "nothing read twice:\n{log}");
    assert!(
        !log.contains("partitions revoked"),
        "the group kept the run as a member through the pause:\n{log}"
    );
}
