use super::*;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("a test time")
        .with_timezone(&Utc)
}

fn refused(text: &str, zone: Option<&str>, jitter: Option<&str>) -> ScheduleError {
    Schedule::parse(text, zone, jitter).expect_err(text)
}

#[test]
fn an_interval_starts_that_long_after() {
    for (text, secs) in [("30s", 30), ("15m", 900), ("1h", 3600), (" 2h 30m ", 9000)] {
        let schedule = Schedule::parse(text, None, None).expect(text);
        let t = at("2026-01-01T00:00:00Z");
        assert_eq!(
            schedule.next_after(t),
            Some(t + chrono::TimeDelta::seconds(secs)),
            "{text}"
        );
        assert_eq!(schedule.jitter(), Duration::ZERO);
    }
    assert_eq!(
        Schedule::parse("15m", None, Some("1m"))
            .expect("valid")
            .to_string(),
        "every 15m, jitter up to 1m"
    );
}

#[test]
fn bad_intervals_are_refused_naming_what_is_wrong() {
    assert_eq!(refused("", None, None), ScheduleError::Empty);
    assert_eq!(refused("   ", None, None), ScheduleError::Empty);
    assert!(matches!(
        refused("0s", None, None),
        ScheduleError::ZeroInterval { .. }
    ));
    let e = refused("400days", None, None);
    assert!(matches!(e, ScheduleError::IntervalTooLong { .. }), "{e}");
    assert!(e.to_string().contains("400days"), "{e}");
    // Huge numbers: an overflow is "too long", never a panic.
    for huge in [
        "99999999999999999999999999s",
        "18446744073709551615s",
        "18446744073709551615y",
    ] {
        let e = refused(huge, None, None);
        assert!(
            matches!(e, ScheduleError::IntervalTooLong { .. }),
            "{huge}: {e}"
        );
    }
    let e = refused("30 seconds please", None, None);
    assert!(matches!(e, ScheduleError::Unreadable { .. }), "{e}");
    let e = refused("3x", None, None);
    assert!(e.to_string().contains("\"3x\""), "{e}");
    let e = refused("1h", Some("Europe/Berlin"), None);
    assert!(matches!(e, ScheduleError::ZoneForInterval { .. }), "{e}");
}

#[test]
fn a_cron_expression_gives_its_next_match() {
    let schedule = Schedule::parse("*/15 * * * *", None, None).expect("valid");
    assert_eq!(
        schedule.next_after(at("2026-03-01T10:07:00Z")),
        Some(at("2026-03-01T10:15:00Z"))
    );
    // Strictly after: a start at a match gives the next one.
    assert_eq!(
        schedule.next_after(at("2026-03-01T10:15:00Z")),
        Some(at("2026-03-01T10:30:00Z"))
    );
    let seconds = Schedule::parse("*/5 * * * * *", None, None).expect("with seconds");
    assert_eq!(
        seconds.next_after(at("2026-03-01T10:07:01Z")),
        Some(at("2026-03-01T10:07:05Z"))
    );
    assert!(
        Schedule::parse("0 3 * * *", Some("Europe/Berlin"), None)
            .expect("valid")
            .to_string()
            .contains("Europe/Berlin")
    );
}

#[test]
fn bad_cron_expressions_and_zones_are_refused() {
    for bad in [
        "61 * * * *",
        "* 25 * * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 9",
        "* * *",
        "a b c d e",
        // Hostile numbers and steps: refused, never a panic.
        "*/0 * * * *",
        "99999999999999999999 * * * *",
        "1-99999999999 * * * *",
        "*/99999999999999999999 * * * *",
        "0 0 * * 5#9",
        "* * * * * * * *",
    ] {
        let e = refused(bad, None, None);
        assert!(matches!(e, ScheduleError::Unreadable { .. }), "{bad}: {e}");
        assert!(e.to_string().contains(bad), "{bad}: {e}");
    }
    let e = refused("0 0 30 2 *", None, None);
    assert!(matches!(e, ScheduleError::NeverMatches { .. }), "{e}");
    let e = refused("0 3 * * *", Some("Mars/Olympus"), None);
    assert_eq!(
        e,
        ScheduleError::UnknownZone {
            zone: "Mars/Olympus".into()
        }
    );
    assert!(e.to_string().contains("Mars/Olympus"));
}

#[test]
fn a_cron_in_a_zone_follows_its_daylight_saving_time() {
    // Berlin: 2026-03-29 02:00 CET becomes 03:00 CEST; 2026-10-25 03:00 CEST becomes 02:00 CET.
    let daily = Schedule::parse("30 1 * * *", Some("Europe/Berlin"), None).expect("valid");
    // 01:30 CET is 00:30 UTC in winter, 01:30 CEST is 23:30 UTC the day before in summer.
    assert_eq!(
        daily.next_after(at("2026-03-28T12:00:00Z")),
        Some(at("2026-03-29T00:30:00Z"))
    );
    assert_eq!(
        daily.next_after(at("2026-03-29T12:00:00Z")),
        Some(at("2026-03-29T23:30:00Z"))
    );
    // 02:30 does not exist on the spring day: the start is the first time after the gap,
    // 03:00 CEST (never a time that was not); the day after it is 02:30 CEST again.
    let gap = Schedule::parse("30 2 * * *", Some("Europe/Berlin"), None).expect("valid");
    assert_eq!(
        gap.next_after(at("2026-03-28T12:00:00Z")),
        Some(at("2026-03-29T01:00:00Z"))
    );
    assert_eq!(
        gap.next_after(at("2026-03-29T01:00:00Z")),
        Some(at("2026-03-30T00:30:00Z"))
    );
    // 02:30 happens twice on the autumn day: one start, at the first (CEST), not two.
    let autumn: Vec<_> = std::iter::successors(gap.next_after(at("2026-10-24T12:00:00Z")), |&t| {
        gap.next_after(t)
    })
    .take_while(|&t| t < at("2026-10-26T00:00:00Z"))
    .collect();
    assert_eq!(
        autumn,
        [at("2026-10-25T00:30:00Z")],
        "02:30 CEST once, not 02:30 CET again"
    );
    // In UTC the same expression knows no such days.
    let utc = Schedule::parse("30 2 * * *", None, None).expect("valid");
    assert_eq!(
        utc.next_after(at("2026-03-29T00:00:00Z")),
        Some(at("2026-03-29T02:30:00Z"))
    );
}

#[test]
fn jitter_delays_each_start_by_at_most_itself() {
    let schedule = Schedule::parse("1h", None, Some("10m")).expect("valid");
    assert_eq!(schedule.jitter(), Duration::from_secs(600));
    let t = at("2026-01-01T00:00:00Z");
    for _ in 0..200 {
        let start = schedule.jittered(t);
        assert!(
            start >= t && start <= t + chrono::TimeDelta::minutes(10),
            "{start}"
        );
    }
    let none = Schedule::parse("1h", None, None).expect("valid");
    assert_eq!(none.jittered(t), t);
}

#[test]
fn bad_jitters_are_refused() {
    let e = refused("1m", None, Some("1m"));
    assert!(matches!(e, ScheduleError::JitterNotShorter { .. }), "{e}");
    assert!(e.to_string().contains("1m"), "{e}");
    assert!(matches!(
        refused("1m", None, Some("2h")),
        ScheduleError::JitterNotShorter { .. }
    ));
    assert!(matches!(
        refused("1m", None, Some("soon")),
        ScheduleError::BadJitter { .. }
    ));
    // A cron's jitter against the shortest gap between its starts: at 3:00
    // and 3:10 every day, 10 minutes is too long, 9 is not.
    let e = refused("0,10 3 * * *", None, Some("10m"));
    assert!(matches!(e, ScheduleError::JitterNotShorter { .. }), "{e}");
    assert!(Schedule::parse("0,10 3 * * *", None, Some("9m")).is_ok());
    assert!(Schedule::parse("0 3 * * *", None, Some("23h")).is_ok());
    // A cron that is rarely due (leap days: 500 starts are 2,000 years) is
    // checked too (45 ms in a debug build).
    assert!(Schedule::parse("0 0 29 2 *", None, Some("1h")).is_ok());
    assert!(matches!(
        refused("0 3 * * *", None, Some("400days")),
        ScheduleError::JitterTooLong { .. }
    ));
    assert!(matches!(
        refused("0 3 * * *", None, Some("99999999999999999999999s")),
        ScheduleError::JitterTooLong { .. }
    ));
    // A cron's jitter may be anything up to a year.
    assert!(Schedule::parse("0 3 * * *", None, Some("2h")).is_ok());
}

#[test]
fn very_long_text_is_refused_unread() {
    let long = "1".repeat(100_000) + "s";
    assert!(matches!(
        refused(&long, None, None),
        ScheduleError::TooLong {
            what: "schedule",
            ..
        }
    ));
    let long_cron = vec!["*"; 50_000].join(" ");
    assert!(matches!(
        refused(&long_cron, None, None),
        ScheduleError::TooLong { .. }
    ));
    assert!(matches!(
        refused("1h", Some(&"A".repeat(10_000)), None),
        ScheduleError::TooLong {
            what: "time zone",
            ..
        }
    ));
    assert!(matches!(
        refused("1h", None, Some(&"9".repeat(10_000))),
        ScheduleError::TooLong { what: "jitter", .. }
    ));
    // The message does not repeat the text.
    assert!(refused(&long, None, None).to_string().len() < 200);
}

#[test]
fn a_late_run_skips_the_starts_it_missed() {
    let every = Schedule::parse("10s", None, None).expect("valid");
    let due = at("2026-01-01T00:00:00Z");
    // On time: the next start, nothing skipped.
    assert_eq!(
        every.following(due, at("2026-01-01T00:00:03Z")),
        Some((at("2026-01-01T00:00:10Z"), 0))
    );
    // Ended at 35s: the starts at 10, 20 and 30s are skipped; the next is at 40s.
    assert_eq!(
        every.following(due, at("2026-01-01T00:00:35Z")),
        Some((at("2026-01-01T00:00:40Z"), 3))
    );
    // Exactly at a start: that one is missed too (it is not in the future).
    assert_eq!(
        every.following(due, at("2026-01-01T00:00:10Z")),
        Some((at("2026-01-01T00:00:20Z"), 1))
    );
    // Years late with the shortest interval: counted, not walked.
    let second = Schedule::parse("1s", None, None).expect("valid");
    assert_eq!(
        second.following(due, at("2036-01-01T00:00:00.5Z")),
        Some((at("2036-01-01T00:00:01Z"), 315_532_800))
    );
    let cron = Schedule::parse("*/10 * * * * *", None, None).expect("valid");
    assert_eq!(
        cron.following(due, at("2026-01-01T00:00:35Z")),
        Some((at("2026-01-01T00:00:40Z"), 3))
    );
    // A cron years late stops counting but still finds the next start.
    let (next, skipped) = cron
        .following(due, at("2030-01-01T00:00:05Z"))
        .expect("a start");
    assert_eq!(next, at("2030-01-01T00:00:10Z"));
    assert!(skipped >= COUNTED, "{skipped}");
}
