//! Tasks waiting to be started again, in one queue ordered by when each
//! is due: a task whose run was put off by an outage, a new one a money
//! cap holds back, one whose claim among replicas could not be settled.
//! A growing wait doubles with every requeue in a row (from the poll
//! interval up to half an hour), so an outage of hours loses no task and
//! does not hammer what is down; an exact wait is that long.

use crate::forge::ItemRef;
use crate::journal::Waiting;
use crate::task::{Wait, Why};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tokio::time::Instant;

const LONGEST_WAIT: Duration = Duration::from_secs(30 * 60);

#[derive(Default)]
pub struct Requeue {
    /// (when, key), soonest first; each key at most once.
    queue: BTreeSet<(Instant, String)>,
    /// What each queued key starts again, when, and since when it waits
    /// (seconds since the Unix epoch).
    entries: HashMap<String, (Instant, ItemRef, Why, i64)>,
    /// Growing requeues in a row, by task key.
    in_a_row: HashMap<String, u32>,
}

impl Requeue {
    /// Queues `item` again (in place of any earlier entry of it) after
    /// `wait`, growing from `first_wait`; returns how long it waits.
    pub fn put(&mut self, item: ItemRef, wait: Wait, why: Why, first_wait: Duration) -> Duration {
        let key = item.key();
        let wait = match wait {
            Wait::Exactly(wait) => wait,
            Wait::Growing => {
                let count = self.in_a_row.entry(key.clone()).or_insert(0);
                let wait = first_wait
                    .max(Duration::from_secs(1))
                    .saturating_mul(1 << (*count).min(16))
                    .min(LONGEST_WAIT);
                *count += 1;
                wait
            }
        };
        self.remove(&key);
        let at = Instant::now() + wait;
        self.queue.insert((at, key.clone()));
        let since = crate::journal::now_secs();
        self.entries.insert(key, (at, item, why, since));
        wait
    }

    /// The task ended some other way: its next growing wait starts over.
    pub fn ended(&mut self, key: &str) {
        self.in_a_row.remove(key);
    }

    /// Takes the tasks whose wait is over, soonest first.
    pub fn due(&mut self) -> Vec<(ItemRef, Why)> {
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some((at, key)) = self.queue.first().cloned() {
            if at > now {
                break;
            }
            self.queue.remove(&(at, key.clone()));
            if let Some((_, item, why, _)) = self.entries.remove(&key) {
                due.push((item, why));
            }
        }
        due
    }

    /// The queued tasks as the status page lists what waits: on what, in
    /// words, and since when.
    pub fn listed(&self) -> Vec<Waiting> {
        let now = Instant::now();
        let mut listed: Vec<Waiting> = self
            .entries
            .iter()
            .map(|(key, (at, _, why, since))| Waiting {
                key: key.clone(),
                on: format!(
                    "{}; started again in {} s",
                    waits_for(*why),
                    at.saturating_duration_since(now).as_secs()
                ),
                since: *since,
            })
            .collect();
        listed.sort_by_key(|w| w.since);
        listed
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn remove(&mut self, key: &str) {
        if let Some((at, _, _, _)) = self.entries.remove(key) {
            self.queue.remove(&(at, key.to_owned()));
        }
    }
}

/// What a requeued task waits for, in words.
fn waits_for(why: Why) -> &'static str {
    match why {
        Why::Outage => "a forge, a git remote or the Docker engine to answer again",
        Why::ClaimLater => "the replicas' claim to be settled",
        Why::Budget => "a money cap's period to turn",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(number: u64) -> ItemRef {
        ItemRef::github_issue("acme/app", number)
    }

    fn growing(r: &mut Requeue, why: Why) -> Duration {
        r.put(item(4), Wait::Growing, why, Duration::from_secs(10))
    }

    #[tokio::test(start_paused = true)]
    async fn growing_waits_double_and_start_over_after_another_ending() {
        let mut r = Requeue::default();
        assert_eq!(growing(&mut r, Why::Outage), Duration::from_secs(10));
        assert!(r.due().is_empty());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(r.due(), vec![(item(4), Why::Outage)]);
        // A claim put off counts in the same row.
        assert_eq!(growing(&mut r, Why::ClaimLater), Duration::from_secs(20));
        assert_eq!(growing(&mut r, Why::Outage), Duration::from_secs(40));
        for _ in 0..20 {
            growing(&mut r, Why::Outage);
        }
        assert_eq!(growing(&mut r, Why::Outage), LONGEST_WAIT);
        assert_eq!(r.len(), 1, "a task is queued once");
        r.ended(&item(4).key());
        assert_eq!(growing(&mut r, Why::Outage), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn an_exact_wait_is_exact_held_once_and_leaves_the_row_alone() {
        let mut r = Requeue::default();
        let base = Duration::from_secs(10);
        let day = Duration::from_secs(9 * 3600);
        r.put(item(4), Wait::Growing, Why::Outage, base);
        r.put(item(4), Wait::Exactly(day), Why::Budget, base);
        r.put(item(4), Wait::Exactly(day), Why::Budget, base);
        assert_eq!(r.len(), 1);
        tokio::time::advance(day - Duration::from_secs(1)).await;
        assert!(r.due().is_empty());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(r.due(), vec![(item(4), Why::Budget)]);
        assert_eq!(growing(&mut r, Why::Outage), Duration::from_secs(20));
    }

    #[tokio::test(start_paused = true)]
    async fn tasks_come_due_in_the_order_of_their_time() {
        let mut r = Requeue::default();
        r.put(
            item(1),
            Wait::Exactly(Duration::from_secs(30)),
            Why::Budget,
            Duration::ZERO,
        );
        r.put(item(2), Wait::Growing, Why::Outage, Duration::from_secs(5));
        r.put(item(3), Wait::Growing, Why::ClaimLater, Duration::from_secs(20));
        // Listed for the status page with what each waits for.
        let listed = r.listed();
        assert_eq!(listed.len(), 3);
        let outage = listed.iter().find(|w| w.key == item(2).key()).unwrap();
        assert_eq!(
            outage.on,
            "a forge, a git remote or the Docker engine to answer again; started again in 5 s"
        );
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(
            r.due(),
            vec![
                (item(2), Why::Outage),
                (item(3), Why::ClaimLater),
                (item(1), Why::Budget)
            ]
        );
        assert_eq!(r.len(), 0);
    }
}
