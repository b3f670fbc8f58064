//! Which tasks run: the queue of tasks waiting to start (each with the
//! reason it starts), the set of those running, and the deferred ones
//! waiting out an outage. The daemon's loop feeds it (polls, the journal,
//! takeovers, deferrals that come due) and asks it what may start now.

use super::deferred::Deferrals;
use crate::forge::ItemRef;
use crate::task::TaskEnd;
use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinSet;

/// Why a task starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartReason {
    /// A trigger the poll found.
    New,
    /// Unfinished in the journal when the daemon started.
    Resume,
    /// Claimed from a replica that went silent or handed it over.
    Takeover,
    /// Deferred during an outage; its wait is over.
    Retry,
    /// Its plan, waiting for approval, was answered (or timed out).
    PlanAnswered,
}

impl StartReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StartReason::New => "new",
            StartReason::Resume => "resume",
            StartReason::Takeover => "takeover",
            StartReason::Retry => "deferred retry",
            StartReason::PlanAnswered => "plan answered",
        }
    }

    /// Work already begun goes on when new claims wait (a disk low on space).
    fn continues_work(self) -> bool {
        !matches!(self, StartReason::New)
    }
}

/// A running task's key and how it ended.
pub type Finished = Result<(String, TaskEnd), tokio::task::JoinError>;

#[derive(Default)]
pub struct Scheduler {
    waiting: VecDeque<(ItemRef, StartReason)>,
    /// Keys of tasks running or about to.
    active: HashSet<String>,
    running: JoinSet<(String, TaskEnd)>,
    deferrals: Deferrals,
}

impl Scheduler {
    /// Queues `item`; a new trigger for a task already running or waiting
    /// is dropped (the running task reads the thread anew).
    pub fn push(&mut self, item: ItemRef, reason: StartReason) {
        if reason == StartReason::New {
            let key = item.key();
            if self.active.contains(&key) || self.waiting.iter().any(|(q, _)| q.key() == key) {
                return;
            }
        }
        self.waiting.push_back((item, reason));
    }

    /// Moves the deferred tasks whose wait is over to the queue.
    pub fn retry_due(&mut self) {
        for item in self.deferrals.due() {
            tracing::info!(task = %item, "trying the deferred task again");
            self.waiting.push_back((item, StartReason::Retry));
        }
    }

    /// The next task that may start, marked active, while fewer than
    /// `limit` run. With `new_claims_wait`, only work already begun starts.
    pub fn next(&mut self, limit: usize, new_claims_wait: bool) -> Option<(ItemRef, StartReason)> {
        while self.active.len() < limit {
            if new_claims_wait && self.waiting.front().is_some_and(|(_, why)| !why.continues_work()) {
                return None;
            }
            let (item, why) = self.waiting.pop_front()?;
            if self.active.insert(item.key()) {
                return Some((item, why));
            }
        }
        None
    }

    /// A task [`next`](Self::next) gave that did not start after all.
    pub fn not_started(&mut self, item: &ItemRef) {
        self.active.remove(&item.key());
    }

    /// Puts off a task that could not start or ended deferred; how long it waits.
    pub fn put_off(&mut self, item: ItemRef, first_wait: Duration) -> Duration {
        self.active.remove(&item.key());
        self.deferrals.put_off(item, first_wait)
    }

    /// Takes `item` (given by [`next`](Self::next)) back, to start it
    /// after `wait` exactly.
    pub fn wait(&mut self, item: ItemRef, wait: Duration) {
        self.active.remove(&item.key());
        self.deferrals.put_off_for(item, wait);
    }

    /// Runs a task that [`next`](Self::next) gave.
    pub fn spawn(&mut self, key: String, task: impl Future<Output = TaskEnd> + Send + 'static) {
        self.running.spawn(async move { (key, task.await) });
    }

    /// The next running task to end; `None` when none runs.
    pub async fn join_next(&mut self) -> Option<Finished> {
        self.running.join_next().await
    }

    /// Bookkeeping for a task that returned: its key and ending, unless it
    /// crashed (a panicking task is a bug: its key stays active, so it is
    /// not restarted in a loop).
    pub fn finished(&mut self, done: Finished) -> Option<(String, TaskEnd)> {
        match done {
            Ok((key, end)) => {
                self.active.remove(&key);
                tracing::debug!(key = %key, "task finished: {end:?}");
                Some((key, end))
            }
            Err(e) => {
                tracing::error!("a task crashed: {e}");
                None
            }
        }
    }

    /// After [`finished`](Self::finished): a deferred task waits, doubling
    /// its wait each time in a row; any other ending starts that over.
    pub fn after(&mut self, key: &str, end: &TaskEnd, first_wait: Duration) {
        match (end, ItemRef::parse_key(key)) {
            (TaskEnd::Deferred { .. }, Some(item)) => {
                let wait = self.deferrals.put_off(item.clone(), first_wait);
                tracing::info!(task = %item, "deferred; trying again in {} s", wait.as_secs());
            }
            _ => self.deferrals.ended(key),
        }
    }

    pub fn active(&self) -> &HashSet<String> {
        &self.active
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Tasks waiting to start, deferred ones included.
    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.deferrals.len()
    }

    /// Queued tasks (not the deferred ones).
    pub fn queued(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{ForgeKind, ItemKind};

    fn item(number: u64) -> ItemRef {
        ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/app".into(),
            kind: ItemKind::Issue,
            number,
        }
    }

    #[test]
    fn new_triggers_for_known_tasks_are_dropped_and_the_limit_holds() {
        let mut s = Scheduler::default();
        s.push(item(1), StartReason::New);
        s.push(item(1), StartReason::New);
        s.push(item(2), StartReason::Resume);
        assert_eq!(s.queued(), 2);
        assert_eq!(s.next(1, false), Some((item(1), StartReason::New)));
        assert_eq!(s.next(1, false), None, "one at a time");
        s.push(item(1), StartReason::New);
        assert_eq!(s.queued(), 1, "running already");
        s.not_started(&item(1));
        assert_eq!(s.next(1, false), Some((item(2), StartReason::Resume)));
    }

    #[test]
    fn while_new_claims_wait_only_begun_work_starts() {
        let mut s = Scheduler::default();
        s.push(item(1), StartReason::Takeover);
        s.push(item(2), StartReason::New);
        s.push(item(3), StartReason::Retry);
        assert_eq!(s.next(5, true), Some((item(1), StartReason::Takeover)));
        assert_eq!(s.next(5, true), None, "a new claim waits at the front");
        assert_eq!(s.next(5, false), Some((item(2), StartReason::New)));
        assert_eq!(s.next(5, true), Some((item(3), StartReason::Retry)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_deferred_ending_comes_back_as_a_retry() {
        let mut s = Scheduler::default();
        s.push(item(7), StartReason::New);
        let (started, _) = s.next(1, false).unwrap();
        s.spawn(started.key(), async {
            TaskEnd::Deferred {
                reason: "the forge is away".into(),
            }
        });
        let done = s.join_next().await.unwrap();
        let (key, end) = s.finished(done).unwrap();
        s.after(&key, &end, Duration::from_secs(10));
        assert!(s.active().is_empty());
        assert_eq!(s.waiting(), 1);
        s.retry_due();
        assert_eq!(s.next(1, false), None, "not yet");
        tokio::time::advance(Duration::from_secs(10)).await;
        s.retry_due();
        assert_eq!(s.next(1, false), Some((item(7), StartReason::Retry)));
    }
}
