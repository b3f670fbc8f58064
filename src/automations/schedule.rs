//! When an automation runs: the next times of its cron pattern in its
//! time zone, and the one decision taken at each look, by the rule
//! Kubernetes CronJobs follow: of the times passed since the last one
//! decided, only the latest may run, and only while it is at most the
//! starting deadline ago; the earlier ones are passed over.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use std::time::Duration;

/// Past this many passed-over times the count stops (a schedule of every
/// minute after months of downtime).
const COUNT_AT_MOST: usize = 10_000;

/// The first time of `cron` in `tz` strictly after `after`.
pub fn next_after(cron: &Cron, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    cron.find_next_occurrence(&after.with_timezone(&tz), false)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The next `count` times of `cron` in `tz` after `after`.
pub fn next_times(cron: &Cron, tz: Tz, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
    let mut out = Vec::with_capacity(count);
    let mut at = after;
    while out.len() < count {
        match next_after(cron, tz, at) {
            Some(next) => {
                out.push(next);
                at = next;
            }
            None => break,
        }
    }
    out
}

/// What to do at a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// No time passed since the last one decided.
    Nothing,
    /// Open the issue for `slot`, the latest time passed; `passed_over`
    /// earlier times passed since the last one decided are not run.
    Run {
        slot: DateTime<Utc>,
        passed_over: usize,
        late: Duration,
    },
    /// `slot`, the latest time passed, is further back than the starting
    /// deadline: it is not run, nor are the `passed_over` before it.
    TooLate {
        slot: DateTime<Utc>,
        passed_over: usize,
        late: Duration,
    },
}

impl Due {
    /// Whether a run is a catch-up: earlier times were passed over, or
    /// its own time is more than a minute ago (the daemon was down).
    pub fn is_catch_up(&self) -> bool {
        match self {
            Due::Run {
                passed_over, late, ..
            } => *passed_over > 0 || *late > Duration::from_secs(60),
            _ => false,
        }
    }
}

/// The decision at `now` for an automation whose last decided time is
/// `last`: the latest time in `(last, now]`, run when at most `deadline`
/// ago.
pub fn due(cron: &Cron, tz: Tz, last: DateTime<Utc>, now: DateTime<Utc>, deadline: Duration) -> Due {
    let mut latest = None;
    let mut count = 0usize;
    let mut at = last;
    while let Some(next) = next_after(cron, tz, at).filter(|t| *t <= now) {
        count += 1;
        latest = Some(next);
        at = next;
        if count >= COUNT_AT_MOST {
            // The latest time itself, without walking every one before it.
            latest = cron
                .find_previous_occurrence(&now.with_timezone(&tz), true)
                .ok()
                .map(|t| t.with_timezone(&Utc))
                .or(latest);
            break;
        }
    }
    let Some(slot) = latest else {
        return Due::Nothing;
    };
    let late = (now - slot).to_std().unwrap_or_default();
    let passed_over = count.saturating_sub(1);
    if late <= deadline {
        Due::Run {
            slot,
            passed_over,
            late,
        }
    } else {
        Due::TooLate {
            slot,
            passed_over,
            late,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_schedule;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_daily_time_keeps_its_wall_clock_across_the_spring_and_autumn_changes() {
        // 09:30 in Berlin: CET (+01:00) until 2026-03-29, CEST (+02:00) after.
        let cron = parse_schedule("30 9 * * *").unwrap();
        let berlin = chrono_tz::Europe::Berlin;
        let times = next_times(&cron, berlin, utc("2026-03-27T12:00:00Z"), 3);
        assert_eq!(
            times,
            vec![
                utc("2026-03-28T08:30:00Z"),
                utc("2026-03-29T07:30:00Z"),
                utc("2026-03-30T07:30:00Z"),
            ]
        );
        let autumn = next_times(&cron, berlin, utc("2026-10-24T12:00:00Z"), 2);
        assert_eq!(
            autumn,
            vec![utc("2026-10-25T08:30:00Z"), utc("2026-10-26T08:30:00Z")]
        );
    }

    #[test]
    fn a_time_inside_the_spring_gap_runs_once_right_after_it_and_an_hourly_one_skips_it() {
        // New York springs forward at 02:00 on 2026-03-08: 02:30 does not exist.
        let ny = chrono_tz::America::New_York;
        let fixed = parse_schedule("30 2 * * *").unwrap();
        let times = next_times(&fixed, ny, utc("2026-03-07T12:00:00Z"), 2);
        // 03:00 EDT (07:00Z) on the day of the gap, then 02:30 EDT.
        assert_eq!(
            times,
            vec![utc("2026-03-08T07:00:00Z"), utc("2026-03-09T06:30:00Z")]
        );
        let hourly = parse_schedule("30 * * * *").unwrap();
        let around = next_times(&hourly, ny, utc("2026-03-08T06:00:00Z"), 3);
        // 01:30 EST, then 03:30 EDT: one real hour apart, no 02:30.
        assert_eq!(
            around,
            vec![
                utc("2026-03-08T06:30:00Z"),
                utc("2026-03-08T07:30:00Z"),
                utc("2026-03-08T08:30:00Z"),
            ]
        );
    }

    #[test]
    fn a_time_in_the_autumn_overlap_runs_once() {
        // New York falls back at 02:00 on 2026-11-01: 01:30 happens twice.
        let ny = chrono_tz::America::New_York;
        let cron = parse_schedule("30 1 * * *").unwrap();
        let times = next_times(&cron, ny, utc("2026-11-01T00:00:00Z"), 2);
        assert_eq!(times.len(), 2);
        assert_eq!(
            times[0],
            utc("2026-11-01T05:30:00Z"),
            "01:30 EDT, the first of the two"
        );
        assert_eq!(
            times[1],
            utc("2026-11-02T06:30:00Z"),
            "the next day, not 01:30 EST the same night"
        );
    }

    #[test]
    fn nothing_is_due_before_the_next_time() {
        let cron = parse_schedule("* * * * *").unwrap();
        let last = utc("2026-12-08T10:00:00Z");
        assert_eq!(
            due(&cron, chrono_tz::UTC, last, utc("2026-12-08T10:00:59Z"), HOUR),
            Due::Nothing
        );
        let on_time = due(&cron, chrono_tz::UTC, last, utc("2026-12-08T10:01:00Z"), HOUR);
        assert_eq!(
            on_time,
            Due::Run {
                slot: utc("2026-12-08T10:01:00Z"),
                passed_over: 0,
                late: Duration::ZERO
            }
        );
        assert!(!on_time.is_catch_up());
    }

    #[test]
    fn one_missed_time_within_the_deadline_runs_once() {
        let cron = parse_schedule("0 9 * * *").unwrap();
        let last = utc("2026-12-07T09:00:00Z");
        let now = utc("2026-12-08T09:40:00Z");
        let decided = due(&cron, chrono_tz::UTC, last, now, HOUR);
        assert_eq!(
            decided,
            Due::Run {
                slot: utc("2026-12-08T09:00:00Z"),
                passed_over: 0,
                late: Duration::from_secs(40 * 60)
            }
        );
        assert!(decided.is_catch_up());
        // Once decided, the same look later finds nothing more.
        assert_eq!(
            due(&cron, chrono_tz::UTC, utc("2026-12-08T09:00:00Z"), now, HOUR),
            Due::Nothing
        );
    }

    #[test]
    fn a_missed_time_beyond_the_deadline_does_not_run() {
        let cron = parse_schedule("0 9 * * *").unwrap();
        let decided = due(
            &cron,
            chrono_tz::UTC,
            utc("2026-12-07T09:00:00Z"),
            utc("2026-12-08T10:00:01Z"),
            HOUR,
        );
        assert!(
            matches!(decided, Due::TooLate { slot, passed_over: 0, .. } if slot == utc("2026-12-08T09:00:00Z")),
            "{decided:?}"
        );
        assert!(!decided.is_catch_up());
    }

    #[test]
    fn several_missed_times_run_once_as_the_latest() {
        let cron = parse_schedule("*/10 * * * *").unwrap();
        let decided = due(
            &cron,
            chrono_tz::UTC,
            utc("2026-12-08T08:00:00Z"),
            utc("2026-12-08T08:55:00Z"),
            HOUR,
        );
        assert_eq!(
            decided,
            Due::Run {
                slot: utc("2026-12-08T08:50:00Z"),
                passed_over: 4,
                late: Duration::from_secs(300)
            }
        );
        // Months of downtime on a schedule of every minute: the latest
        // time only, found without walking them all.
        let long = due(
            &parse_schedule("* * * * *").unwrap(),
            chrono_tz::UTC,
            utc("2026-01-01T00:00:00Z"),
            utc("2026-06-01T00:00:30Z"),
            HOUR,
        );
        assert!(
            matches!(long, Due::Run { slot, .. } if slot == utc("2026-06-01T00:00:00Z")),
            "{long:?}"
        );
    }
}
