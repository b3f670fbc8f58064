//! The daemon's side of `cluster.mode: kubernetes`: a task starts only under
//! a Lease this replica holds (see [`crate::replicas::lease`]); its forge
//! writes are fenced by it; the claim is renewed while the task runs or
//! waits to be tried again, released when it ends, handed over when the
//! daemon stops; and every poll looks for Leases whose holder went silent
//! or handed them over, to take those tasks over.
//!
//! The forge stays the source of truth: a claimed task runs only while its
//! item is open and carries the trigger or the processing label (a task
//! another replica finished has neither, whatever a late Lease says).

use crate::config::{ClusterConfig, LabelsConfig};
use crate::forge::{Forge, ItemRef};
use crate::journal::{Journal, Phase, Transition};
use crate::replicas::fenced::FencedForge;
use crate::replicas::kube_leases::{self, KubeLeases};
use crate::replicas::lease::{Attempt, Claim, Claimer};
use crate::replicas::lease_name;
use crate::task::Action;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub struct Coordinator {
    claimer: Claimer,
    group: String,
    labels: LabelsConfig,
    /// Claims this replica holds, by task key: running tasks and deferred
    /// ones waiting to be tried again.
    held: HashMap<String, Arc<Claim>>,
}

/// Whether a task may start.
pub enum Acquired {
    Go(Go),
    /// Another replica has it, or the forge shows no work to do.
    Elsewhere,
    /// The API server or the forge did not answer: try again later.
    Later,
}

/// What a task starts with.
pub struct Go {
    pub forge: Arc<dyn Forge>,
    /// Cancelled the moment the claim is lost.
    pub lost: tokio_util::sync::CancellationToken,
}

impl Coordinator {
    /// Connects to the API server as kubectl would.
    pub async fn connect(config: &ClusterConfig, labels: LabelsConfig) -> Result<Coordinator, String> {
        let client = kube_leases::client().await?;
        let namespace = if config.namespace.is_empty() {
            // The pod's own, or the kubeconfig context's.
            client.default_namespace().to_owned()
        } else {
            config.namespace.clone()
        };
        let api = Arc::new(KubeLeases::new(client, &namespace, &config.lease_group));
        // Unique per process: a restarted replica is a new holder, and its
        // predecessor's claims are taken over like anyone's.
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "forgehand".into());
        let holder = format!("{host}-{:08x}", fastrand::u32(..));
        tracing::info!(namespace = %namespace, group = %config.lease_group, holder = %holder, "claiming tasks with Kubernetes Leases");
        Ok(Coordinator {
            claimer: Claimer::new(api, holder, config.lease_duration),
            group: config.lease_group.clone(),
            labels,
            held: HashMap::new(),
        })
    }

    /// The automations' schedule times among the replicas, over the same
    /// API server, group and holder identity as the task claims.
    pub fn slot_leases(&self) -> crate::replicas::slots::SlotLeases {
        crate::replicas::slots::SlotLeases::new(self.claimer.api(), &self.group, self.claimer.holder())
    }

    /// The labels a reloaded config names (the claims stay).
    pub fn set_labels(&mut self, labels: LabelsConfig) {
        self.labels = labels;
    }

    /// The claim of `item`, held already or claimed now, with the forge its
    /// task writes through.
    pub async fn acquire(&mut self, item: &ItemRef, forge: Arc<dyn Forge>) -> Acquired {
        let key = item.key();
        let claim = match self.held.get(&key) {
            Some(claim) if !claim.lost().is_cancelled() => claim.clone(),
            _ => {
                self.held.remove(&key);
                let name = lease_name(&self.group, item);
                match self.claimer.try_claim(&name, &key).await {
                    Ok(Attempt::Claimed(claim)) => {
                        tokio::spawn(claim.clone().keep());
                        claim
                    }
                    Ok(Attempt::Held { holder }) => {
                        tracing::info!(task = %item, holder = %holder, "another replica holds the task");
                        return Acquired::Elsewhere;
                    }
                    Err(e) => {
                        tracing::warn!(task = %item, "cannot claim the task now: {e}");
                        return Acquired::Later;
                    }
                }
            }
        };
        // The claim is kept while the forge is asked, and after a failed read.
        self.held.insert(key.clone(), claim.clone());
        match forge.item(item).await {
            Ok(found)
                if found.open
                    && (found.has_label(&self.labels.trigger)
                        || found.has_label(&self.labels.processing)) =>
            {
                Acquired::Go(Go {
                    lost: claim.lost(),
                    forge: Arc::new(FencedForge::new(forge, claim)),
                })
            }
            Ok(_) => {
                tracing::info!(task = %item, "claimed, but the item no longer asks for work (done elsewhere, closed or unlabelled); releasing it");
                self.release(&key, &claim).await;
                Acquired::Elsewhere
            }
            Err(e) => {
                tracing::warn!(task = %item, "claimed, but cannot read the item now: {e}");
                Acquired::Later
            }
        }
    }

    /// Leases whose holder went silent for a whole lease duration, or
    /// handed them over: up to `room` of them are taken over, and their
    /// tasks returned to be started now. `configured`: whether a task's
    /// forge is one this daemon works.
    pub async fn sweep(
        &mut self,
        room: usize,
        active: &HashSet<String>,
        configured: impl Fn(&ItemRef) -> bool,
    ) -> Vec<ItemRef> {
        if room == 0 {
            return Vec::new();
        }
        let leases = match self.claimer.list().await {
            Ok(leases) => leases,
            Err(e) => {
                tracing::warn!("cannot list the task Leases now: {e}");
                return Vec::new();
            }
        };
        let mut taken = Vec::new();
        for lease in leases {
            if taken.len() >= room {
                break;
            }
            if self.held.contains_key(&lease.task) || active.contains(&lease.task) {
                continue;
            }
            let Some(item) = ItemRef::parse_key(&lease.task).filter(|i| configured(i)) else {
                continue;
            };
            match self.claimer.take_over_if_silent(lease).await {
                Ok(Attempt::Claimed(claim)) => {
                    tokio::spawn(claim.clone().keep());
                    self.held.insert(item.key(), claim);
                    taken.push(item);
                }
                Ok(Attempt::Held { .. }) => {}
                Err(e) => tracing::warn!(task = %item, "cannot take the task over now: {e}"),
            }
        }
        taken
    }

    /// After a task returned, by its next [`Action`]: a requeued task keeps
    /// its claim until it is tried again; a suspended one (a shutdown) is
    /// handed over; one whose claim was lost is given up here (finished in
    /// this replica's journal, so it is never resumed from it); any other
    /// releases it.
    pub async fn ended(&mut self, key: &str, action: Action, journal: &Journal) {
        let Some(claim) = self.held.get(key).cloned() else {
            return;
        };
        if claim.lost().is_cancelled() {
            self.held.remove(key);
            tracing::info!(task = %key, "the claim was lost; another replica goes on with the task");
            if let Err(e) = journal.transition(
                key,
                Transition::ended(Phase::Stopped, "another replica took the task over"),
            ) {
                tracing::warn!(task = %key, "cannot journal the hand-over: {e}");
            }
            return;
        }
        match action {
            Action::RequeueAfter(..) => {}
            Action::Suspended => {
                self.held.remove(key);
                match claim.hand_over().await {
                    Ok(()) => tracing::info!(task = %key, "handed the task over to the other replicas"),
                    Err(e) => {
                        tracing::warn!(task = %key, "cannot hand the task over ({e}); another replica takes it over when its Lease runs out")
                    }
                }
            }
            _ => self.release(key, &claim).await,
        }
    }

    async fn release(&mut self, key: &str, claim: &Arc<Claim>) {
        self.held.remove(key);
        if let Err(e) = claim.release().await {
            tracing::warn!(task = %key, "cannot release the task's Lease ({e}); it runs out by itself");
        }
    }

    /// The daemon stops: every claim still held (deferred tasks) is handed over.
    pub async fn shutdown(&mut self) {
        for (key, claim) in std::mem::take(&mut self.held) {
            if let Err(e) = claim.hand_over().await {
                tracing::warn!(task = %key, "cannot hand the task over: {e}");
            }
        }
    }
}
