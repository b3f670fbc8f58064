//! Tasks put off because a forge, a git remote or the Docker engine was
//! away: each is started again after a wait that doubles with every
//! deferral in a row (from the poll interval up to half an hour), so an
//! outage of hours loses no task and does not hammer what is down.

use crate::forge::ItemRef;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

const LONGEST_WAIT: Duration = Duration::from_secs(30 * 60);

#[derive(Default)]
pub struct Deferrals {
    waiting: Vec<(Instant, ItemRef)>,
    /// Deferrals in a row, by task key.
    in_a_row: HashMap<String, u32>,
}

impl Deferrals {
    /// Schedules `item` again; returns how long it waits.
    pub fn put_off(&mut self, item: ItemRef, first_wait: Duration) -> Duration {
        let count = self.in_a_row.entry(item.key()).or_insert(0);
        let wait = first_wait
            .max(Duration::from_secs(1))
            .saturating_mul(1 << (*count).min(16))
            .min(LONGEST_WAIT);
        *count += 1;
        self.waiting.push((Instant::now() + wait, item));
        wait
    }

    /// Schedules `item` again after `wait` exactly (a budget's period).
    pub fn put_off_for(&mut self, item: ItemRef, wait: Duration) {
        let key = item.key();
        self.waiting.retain(|(_, waiting)| waiting.key() != key);
        self.waiting.push((Instant::now() + wait, item));
    }

    /// The task ended some other way: its next deferral starts over.
    pub fn ended(&mut self, key: &str) {
        self.in_a_row.remove(key);
    }

    /// Takes the tasks whose wait is over.
    pub fn due(&mut self) -> Vec<ItemRef> {
        let now = Instant::now();
        let (due, waiting): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(|(at, _)| *at <= now);
        self.waiting = waiting;
        due.into_iter().map(|(_, item)| item).collect()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{ForgeKind, ItemKind};

    fn item() -> ItemRef {
        ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/app".into(),
            kind: ItemKind::Issue,
            number: 4,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn waits_double_and_start_over_after_another_ending() {
        let mut d = Deferrals::default();
        let base = Duration::from_secs(10);
        assert_eq!(d.put_off(item(), base), Duration::from_secs(10));
        assert!(d.due().is_empty());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(d.due(), vec![item()]);
        assert_eq!(d.put_off(item(), base), Duration::from_secs(20));
        assert_eq!(d.put_off(item(), base), Duration::from_secs(40));
        for _ in 0..20 {
            d.put_off(item(), base);
        }
        assert_eq!(d.put_off(item(), base), LONGEST_WAIT);
        d.ended(&item().key());
        assert_eq!(d.put_off(item(), base), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_budget_is_exact_and_held_once() {
        let mut d = Deferrals::default();
        let day = Duration::from_secs(9 * 3600);
        d.put_off_for(item(), day);
        d.put_off_for(item(), day);
        assert_eq!(d.len(), 1);
        tokio::time::advance(day - Duration::from_secs(1)).await;
        assert!(d.due().is_empty());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(d.due(), vec![item()]);
    }
}
