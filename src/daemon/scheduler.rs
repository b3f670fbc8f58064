//! Which tasks run: the queue of tasks waiting to start (each with the
//! reason it starts), the set of those running, and the requeued ones
//! waiting out a wait (an outage, a budget's period, a claim to try
//! again). The daemon's loop feeds it (polls, the journal, takeovers,
//! requeues that come due), applies each task's [`Action`] to it, and asks
//! it what may start now.

use super::requeue::Requeue;
use crate::forge::ItemRef;
use crate::task::{Action, TaskEnd, Why};
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
    /// Requeued (an outage, a budget's hold, a claim put off); its wait is over.
    Retry,
    /// Its plan, waiting for approval, was answered (or timed out).
    PlanAnswered,
    /// The checks it waited on ended.
    ChecksEnded,
    /// Its paused label was removed.
    Unpaused,
}

impl StartReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StartReason::New => "new",
            StartReason::Resume => "resume",
            StartReason::Takeover => "takeover",
            StartReason::Retry => "deferred retry",
            StartReason::PlanAnswered => "plan answered",
            StartReason::ChecksEnded => "checks ended",
            StartReason::Unpaused => "unpaused",
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
    /// Tasks to start again after a wait.
    requeue: Requeue,
}

impl Scheduler {
    /// A scheduler whose requeued tasks are kept in `journal`, with those
    /// kept before a restart (but `resumed`: they start now).
    pub fn new(journal: std::sync::Arc<crate::journal::Journal>, resumed: &HashSet<String>) -> Scheduler {
        Scheduler {
            requeue: Requeue::restored(journal, resumed),
            ..Scheduler::default()
        }
    }

    /// Queues `item`; a new trigger for a task already running or waiting
    /// is dropped (the running task reads the thread anew).
    pub fn push(&mut self, item: ItemRef, reason: StartReason) {
        let key = item.key();
        // Queued once, whatever asks again (a watcher looks at every poll
        // until the run starts).
        if self.waiting.iter().any(|(q, _)| q.key() == key) {
            return;
        }
        if reason == StartReason::New && self.active.contains(&key) {
            return;
        }
        self.waiting.push_back((item, reason));
    }

    /// Moves the requeued tasks whose wait is over to the queue.
    pub fn requeue_due(&mut self) {
        for (item, _) in self.requeue.due() {
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

    /// A task [`next`](Self::next) gave that did not start after all, and
    /// that nothing waits for here (another replica has it).
    pub fn not_started(&mut self, item: &ItemRef) {
        self.active.remove(&item.key());
    }

    /// Applies `action` to the task `key`: one that returned (see
    /// [`finished`](Self::finished)), or one [`next`](Self::next) gave that
    /// could not start. A growing wait starts at `first_wait`.
    pub fn apply(&mut self, key: &str, action: Action, first_wait: Duration) {
        self.active.remove(key);
        let Action::RequeueAfter(wait, why) = action else {
            // Ended, suspended (the journal or another replica goes on with
            // it), or waiting for a change its watcher sees.
            self.requeue.ended(key);
            return;
        };
        let Some(item) = ItemRef::parse_key(key) else {
            tracing::warn!(key = %key, "unreadable task key; not requeued");
            return;
        };
        let wait = self.requeue.put(item.clone(), wait, why, first_wait);
        match why {
            Why::Outage => tracing::info!(task = %item, "deferred; trying again in {} s", wait.as_secs()),
            Why::ClaimLater => {
                tracing::info!(task = %item, "trying to claim it again in {} s", wait.as_secs())
            }
            // The budget's hold said so already, with its cap.
            Why::Budget => {}
        }
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

    pub fn active(&self) -> &HashSet<String> {
        &self.active
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Tasks waiting to start, requeued ones included.
    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.requeue.len()
    }

    /// Queued tasks (not the requeued ones).
    pub fn queued(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(number: u64) -> ItemRef {
        ItemRef::github_issue("acme/app", number)
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
    fn a_task_a_watcher_offers_at_every_poll_is_queued_once() {
        let mut s = Scheduler::default();
        s.push(item(4), StartReason::Unpaused);
        s.push(item(4), StartReason::Unpaused);
        s.push(item(4), StartReason::ChecksEnded);
        assert_eq!(s.queued(), 1);
        assert_eq!(s.next(1, false), Some((item(4), StartReason::Unpaused)));
        assert_eq!(s.next(1, false), None);
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
        s.apply(&key, end.action(), Duration::from_secs(10));
        assert!(s.active().is_empty());
        assert_eq!(s.waiting(), 1);
        s.requeue_due();
        assert_eq!(s.next(1, false), None, "not yet");
        tokio::time::advance(Duration::from_secs(10)).await;
        s.requeue_due();
        assert_eq!(s.next(1, false), Some((item(7), StartReason::Retry)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_held_back_before_its_start_gives_its_slot_back_and_waits() {
        let mut s = Scheduler::default();
        s.push(item(3), StartReason::New);
        let (held, _) = s.next(1, false).unwrap();
        let hour = Duration::from_secs(3600);
        s.apply(
            &held.key(),
            Action::RequeueAfter(crate::task::Wait::Exactly(hour), Why::Budget),
            Duration::from_secs(10),
        );
        assert!(s.active().is_empty(), "the slot is free");
        assert_eq!((s.queued(), s.waiting()), (0, 1));
        tokio::time::advance(hour).await;
        s.requeue_due();
        assert_eq!(s.next(1, false), Some((item(3), StartReason::Retry)));
        s.apply(&item(3).key(), Action::Done, Duration::from_secs(10));
        assert_eq!((s.active().len(), s.waiting()), (0, 0));
    }
}
