//! Which replica opens a scheduled automation's issue at one schedule
//! time: one Lease per automation and repository whose annotation holds
//! the last time taken, moved forward only by a compare-and-swap on the
//! Lease's `resourceVersion` (or created if absent). Of replicas deciding
//! the same time, exactly one sees its write land; the others read the
//! time as taken. The Lease carries no claim: nobody renews it, and the
//! task sweep passes over it (its annotation names no task).

use super::lease::{LeaseApi, LeaseError, LeaseRecord};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// What one attempt at a schedule time found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// This replica took it: it opens the issue.
    Mine,
    /// Another replica took this time or a later one (seconds since the epoch).
    Elsewhere(i64),
}

/// The automations' schedule times among replicas.
pub struct SlotLeases {
    api: Arc<dyn LeaseApi>,
    group: String,
    holder: String,
}

/// How many compare-and-swap rounds one attempt makes before it gives up
/// (the next look tries again).
const ROUNDS: usize = 4;

impl SlotLeases {
    pub fn new(api: Arc<dyn LeaseApi>, group: &str, holder: &str) -> SlotLeases {
        SlotLeases {
            api,
            group: group.to_owned(),
            holder: holder.to_owned(),
        }
    }

    /// The Lease of `automation` in `repository` (`github:owner/name`).
    pub fn lease_name(&self, automation: &str, repository: &str) -> String {
        let digest = Sha256::digest(format!("{automation}\n{repository}").as_bytes());
        let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}-automation-{hash}", self.group)
    }

    /// Takes schedule time `slot` (seconds since the epoch) of
    /// `automation` in `repository` for this replica, unless another
    /// took it or a later one.
    pub async fn take(&self, automation: &str, repository: &str, slot: i64) -> Result<Taken, LeaseError> {
        let name = self.lease_name(automation, repository);
        let annotation = format!("automation:{automation}:{repository}@{slot}");
        for _ in 0..ROUNDS {
            let Some(current) = self.api.get(&name).await? else {
                let fresh = LeaseRecord {
                    name: name.clone(),
                    resource_version: String::new(),
                    holder: self.holder.clone(),
                    duration: Duration::from_secs(1),
                    transitions: 0,
                    task: annotation.clone(),
                };
                match self.api.create(&fresh).await {
                    Ok(_) => return Ok(Taken::Mine),
                    Err(LeaseError::AlreadyExists(_)) => continue,
                    Err(e) => return Err(e),
                }
            };
            let stored = stored_slot(&current.task);
            if stored == Some(slot) && current.holder == self.holder {
                // Our own write whose answer was lost, or a look again.
                return Ok(Taken::Mine);
            }
            if let Some(stored) = stored.filter(|s| *s >= slot) {
                return Ok(Taken::Elsewhere(stored));
            }
            let next = LeaseRecord {
                holder: self.holder.clone(),
                transitions: current.transitions.saturating_add(1),
                task: annotation.clone(),
                ..current
            };
            match self.api.replace(&next).await {
                Ok(_) => return Ok(Taken::Mine),
                Err(LeaseError::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(LeaseError::Conflict(name))
    }
}

/// The schedule time an automation Lease's annotation holds.
fn stored_slot(annotation: &str) -> Option<i64> {
    annotation.rsplit_once('@')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use async_trait::async_trait;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// Leases in memory with the API server's compare-and-swap.
    #[derive(Default)]
    struct MemoryLeases {
        leases: Mutex<Store>,
    }

    type Store = (u64, HashMap<String, LeaseRecord>);

    /// Stores `lease` under a new resourceVersion.
    fn put(store: &mut Store, lease: &LeaseRecord) -> LeaseRecord {
        store.0 += 1;
        let stored = LeaseRecord {
            resource_version: store.0.to_string(),
            ..lease.clone()
        };
        store.1.insert(lease.name.clone(), stored.clone());
        stored
    }

    #[async_trait]
    impl LeaseApi for MemoryLeases {
        async fn create(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
            let mut store = self.leases.lock().unwrap();
            if store.1.contains_key(&lease.name) {
                return Err(LeaseError::AlreadyExists(lease.name.clone()));
            }
            Ok(put(&mut store, lease))
        }

        async fn get(&self, name: &str) -> Result<Option<LeaseRecord>, LeaseError> {
            Ok(self.leases.lock().unwrap().1.get(name).cloned())
        }

        async fn replace(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
            let mut store = self.leases.lock().unwrap();
            if store.1.get(&lease.name).map(|l| &l.resource_version) != Some(&lease.resource_version) {
                return Err(LeaseError::Conflict(lease.name.clone()));
            }
            Ok(put(&mut store, lease))
        }

        async fn delete(&self, name: &str, _version: &str) -> Result<(), LeaseError> {
            self.leases.lock().unwrap().1.remove(name);
            Ok(())
        }

        async fn list(&self) -> Result<Vec<LeaseRecord>, LeaseError> {
            Ok(self.leases.lock().unwrap().1.values().cloned().collect())
        }
    }

    #[tokio::test]
    async fn of_two_replicas_one_takes_each_time() {
        let api: Arc<dyn LeaseApi> = Arc::new(MemoryLeases::default());
        let one = SlotLeases::new(api.clone(), "fh", "replica-1");
        let two = SlotLeases::new(api.clone(), "fh", "replica-2");
        assert_eq!(
            one.take("deps", "github:acme/app", 60).await.unwrap(),
            Taken::Mine
        );
        assert_eq!(
            two.take("deps", "github:acme/app", 60).await.unwrap(),
            Taken::Elsewhere(60)
        );
        // Asked again (a lost answer), the taker still holds it.
        assert_eq!(
            one.take("deps", "github:acme/app", 60).await.unwrap(),
            Taken::Mine
        );
        // The next time goes to whoever asks first; an older one is taken.
        assert_eq!(
            two.take("deps", "github:acme/app", 120).await.unwrap(),
            Taken::Mine
        );
        assert_eq!(
            one.take("deps", "github:acme/app", 120).await.unwrap(),
            Taken::Elsewhere(120)
        );
        assert_eq!(
            one.take("deps", "github:acme/app", 60).await.unwrap(),
            Taken::Elsewhere(120)
        );
        // Another repository is another Lease.
        assert_eq!(two.take("deps", "gitlab:g/p", 60).await.unwrap(), Taken::Mine);
        assert_ne!(
            one.lease_name("deps", "github:acme/app"),
            one.lease_name("deps", "gitlab:g/p")
        );
    }
}
