//! Tasks waiting to be started again, in one queue ordered by when each
//! is due: a task whose run was put off by an outage, a new one a money
//! cap holds back, one whose claim among replicas could not be settled.
//! A growing wait doubles with every requeue in a row (from the poll
//! interval up to half an hour), so an outage of hours loses no task and
//! does not hammer what is down; an exact wait is that long. Each wait is
//! also a row of the journal's waits ([`LaterWait`]): the status page
//! lists it with the other waits, and a restarted daemon keeps it.

use crate::forge::ItemRef;
use crate::journal::{now_ms, Journal, LaterWait, WaitFor, WaitKind};
use crate::task::{Wait, Why};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const LONGEST_WAIT: Duration = Duration::from_secs(30 * 60);

#[derive(Default)]
pub struct Requeue {
    /// (when, key), soonest first; each key at most once.
    queue: BTreeSet<(Instant, String)>,
    /// What each queued key starts again, and when.
    entries: HashMap<String, (Instant, ItemRef, Why)>,
    /// Growing requeues in a row, by task key.
    in_a_row: HashMap<String, u32>,
    /// Where each wait is kept (none in tests of the queue alone).
    journal: Option<Arc<Journal>>,
}

impl Requeue {
    /// A queue kept in `journal`, with the waits it kept before a restart
    /// (but those of `resumed`, which start now).
    pub fn restored(journal: Arc<Journal>, resumed: &HashSet<String>) -> Requeue {
        let mut requeue = Requeue {
            journal: Some(journal.clone()),
            ..Requeue::default()
        };
        let kept = journal.open_waits(&[WaitKind::Later]).unwrap_or_else(|e| {
            tracing::error!("cannot read the tasks that wait to be started again: {e}");
            Vec::new()
        });
        for (key, wait) in kept {
            let (WaitFor::Later(wait), Some(item)) = (wait, ItemRef::parse_key(&key)) else {
                continue;
            };
            if resumed.contains(&key) {
                continue;
            }
            let why = why_named(&wait.why);
            tracing::info!(task = %item, "starting it again in {} s, as before the restart", wait.remaining().as_secs());
            requeue.put(item, Wait::Exactly(wait.remaining()), why, Duration::ZERO);
        }
        requeue
    }

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
        self.keep(&key, why, wait);
        self.entries.insert(key, (at, item, why));
        wait
    }

    /// The task ended some other way: its next growing wait starts over.
    pub fn ended(&mut self, key: &str) {
        self.in_a_row.remove(key);
    }

    /// Writes the wait's row (a restarted daemon keeps it).
    fn keep(&self, key: &str, why: Why, wait: Duration) {
        let Some(journal) = &self.journal else {
            return;
        };
        let later = LaterWait {
            why: why_name(why).to_owned(),
            on: waits_for(why).to_owned(),
            due_ms: now_ms().saturating_add(wait.as_millis() as i64),
        };
        if let Err(e) = journal.wait_until(key, &later) {
            tracing::warn!(task = %key, "cannot journal when the task starts again (a restart starts it at once): {e}");
        }
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
            if let Some((_, item, why)) = self.entries.remove(&key) {
                // Queued to start now: a restart resumes it, or the poll finds it.
                if let Some(Err(e)) = self.journal.as_ref().map(|j| j.forget_later(&key)) {
                    tracing::warn!(task = %key, "cannot journal that the task's wait is over: {e}");
                }
                due.push((item, why));
            }
        }
        due
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn remove(&mut self, key: &str) {
        if let Some((at, _, _)) = self.entries.remove(key) {
            self.queue.remove(&(at, key.to_owned()));
        }
    }
}

/// The journal's name of why a task waits.
fn why_name(why: Why) -> &'static str {
    match why {
        Why::Outage => "outage",
        Why::ClaimLater => "claim",
        Why::Budget => "budget",
    }
}

fn why_named(name: &str) -> Why {
    match name {
        "claim" => Why::ClaimLater,
        "budget" => Why::Budget,
        _ => Why::Outage,
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
    async fn a_wait_is_kept_in_the_journal_and_outlives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(Journal::open(dir.path()).unwrap());
        let mut r = Requeue::restored(journal.clone(), &HashSet::new());
        r.put(
            item(1),
            Wait::Exactly(Duration::from_secs(600)),
            Why::Budget,
            Duration::ZERO,
        );
        r.put(item(2), Wait::Growing, Why::Outage, Duration::from_secs(60));
        let listed = journal.waiting().unwrap();
        assert_eq!(listed.len(), 2, "listed with the other waits");
        let budget = listed.iter().find(|w| w.key == item(1).key()).unwrap();
        assert!(
            budget.on.starts_with(waits_for(Why::Budget)) && budget.on.contains("; started again in "),
            "{}",
            budget.on
        );
        // Restarted: the budget's wait is kept; the resumed task starts now.
        let resumed = HashSet::from([item(2).key()]);
        let mut again = Requeue::restored(journal.clone(), &resumed);
        assert_eq!(again.len(), 1);
        tokio::time::advance(Duration::from_secs(601)).await;
        assert_eq!(again.due(), vec![(item(1), Why::Budget)]);
        assert_eq!(
            journal.waiting().unwrap().len(),
            1,
            "only the resumed task's row is left, until it runs"
        );
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
