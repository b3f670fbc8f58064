//! Exactly-once claims among several replicas: one `coordination.k8s.io/v1`
//! Lease per task. The protocol needs nothing of the API server but
//! create-if-absent and compare-and-swap on `resourceVersion`, and it never
//! compares one replica's clock with another's:
//!
//! - **Claim:** create the Lease. `AlreadyExists`: someone holds it.
//! - **Take over:** only a Lease whose `resourceVersion` this replica saw
//!   stay the same for the whole lease duration on its own monotonic clock,
//!   and only with a replace carrying that `resourceVersion` (so of two
//!   replicas trying, one wins). `leaseTransitions` goes up by one: it is
//!   the claim's epoch.
//! - **Renew** every third of the duration. A claim is valid until its last
//!   successful renew's request was sent plus the duration, less a tenth for
//!   clock drift: a replica that has not renewed by then stops at once
//!   ([`Claim::lost`]), before anyone else can have taken over.
//! - **Fence** every write to the forge: [`Claim::fence`] re-reads the Lease
//!   and refuses when its holder or epoch is no longer this claim's.
//! - **Release:** delete with the `resourceVersion` as precondition; or
//!   **hand over** (a daemon stopping mid-task): empty the holder, which
//!   any replica may take over at once.
//!
//! A write whose answer was lost (a 500 after the server applied it) shows
//! up as `AlreadyExists` or `Conflict` on the retry; each such answer is
//! checked against the stored Lease before the claim is given up.

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A Lease as the protocol sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub name: String,
    /// Empty on create; the server's opaque version otherwise.
    pub resource_version: String,
    /// `holderIdentity`.
    pub holder: String,
    /// `leaseDurationSeconds`.
    pub duration: Duration,
    /// `leaseTransitions`: the epoch of the current holder's claim.
    pub transitions: i32,
    /// The task's journal key (an annotation), so a replica taking the
    /// Lease over knows what to resume.
    pub task: String,
}

impl LeaseRecord {
    fn held_by(&self, holder: &str, epoch: i32) -> bool {
        self.holder == holder && self.transitions == epoch
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease {0} already exists")]
    AlreadyExists(String),
    #[error("lease {0} changed since it was read")]
    Conflict(String),
    #[error("the Kubernetes API refused a lease call ({detail})")]
    Api { detail: String, retryable: bool },
}

impl LeaseError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, LeaseError::Api { retryable: true, .. })
    }
}

/// The Lease calls the protocol makes (the API server, or a fake).
#[async_trait]
pub trait LeaseApi: Send + Sync {
    /// Fails with [`LeaseError::AlreadyExists`] when the name is taken.
    async fn create(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError>;
    async fn get(&self, name: &str) -> Result<Option<LeaseRecord>, LeaseError>;
    /// Fails with [`LeaseError::Conflict`] unless `lease.resource_version`
    /// is the stored one.
    async fn replace(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError>;
    /// Deletes only the version given (a precondition).
    async fn delete(&self, name: &str, resource_version: &str) -> Result<(), LeaseError>;
    /// Every task Lease of this installation.
    async fn list(&self) -> Result<Vec<LeaseRecord>, LeaseError>;
}

/// What one claim attempt found.
pub enum Attempt {
    Claimed(Arc<Claim>),
    /// Another replica holds it (and renews it, or has not been silent for
    /// a whole lease duration yet).
    Held {
        holder: String,
    },
}

/// One replica's side of the protocol.
pub struct Claimer {
    api: Arc<dyn LeaseApi>,
    holder: String,
    duration: Duration,
    /// Each held Lease's version and when this replica first saw it.
    seen: Mutex<HashMap<String, (String, Instant)>>,
}

impl Claimer {
    /// `holder`: unique per process (a restarted replica is a new holder).
    pub fn new(api: Arc<dyn LeaseApi>, holder: impl Into<String>, duration: Duration) -> Claimer {
        Claimer {
            api,
            holder: holder.into(),
            duration,
            seen: Mutex::new(HashMap::new()),
        }
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The Lease calls this replica makes (shared with the automations'
    /// schedule times, [`super::slots`]).
    pub fn api(&self) -> Arc<dyn LeaseApi> {
        self.api.clone()
    }

    /// Claims `name` for the task `task` when nobody holds it, or takes it
    /// over when its holder has been silent for a whole lease duration.
    pub async fn try_claim(&self, name: &str, task: &str) -> Result<Attempt, LeaseError> {
        let fresh = LeaseRecord {
            name: name.to_owned(),
            resource_version: String::new(),
            holder: self.holder.clone(),
            duration: self.duration,
            transitions: 0,
            task: task.to_owned(),
        };
        let sent = Instant::now();
        match self.api.create(&fresh).await {
            Ok(created) => return Ok(Attempt::Claimed(self.claim(created, sent))),
            Err(LeaseError::AlreadyExists(_)) => {}
            Err(err) => return Err(err),
        }
        let Some(current) = self.api.get(name).await? else {
            // Released between the two calls: the next poll creates it.
            return Ok(Attempt::Held {
                holder: String::new(),
            });
        };
        self.consider(current, sent).await
    }

    /// Every task Lease of this installation; what it no longer lists is
    /// forgotten by the silence watch.
    pub async fn list(&self) -> Result<Vec<LeaseRecord>, LeaseError> {
        let leases = self.api.list().await?;
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|name, _| leases.iter().any(|l| l.name == *name));
        Ok(leases)
    }

    /// Looks at a Lease someone else created (from [`Claimer::try_claim`],
    /// or listed by a sweep for silent holders): takes it over when its
    /// holder handed it over or has been silent for a whole duration.
    pub async fn take_over_if_silent(&self, current: LeaseRecord) -> Result<Attempt, LeaseError> {
        self.consider(current, Instant::now()).await
    }

    /// `asked`: when this replica's own create of it was sent, if it was.
    async fn consider(&self, current: LeaseRecord, asked: Instant) -> Result<Attempt, LeaseError> {
        let name = current.name.clone();
        if current.holder == self.holder {
            // Our own create or takeover whose answer was lost.
            self.forget(&name);
            return Ok(Attempt::Claimed(self.claim(current, asked)));
        }
        let handed_over = current.holder.is_empty();
        let silent_long_enough = handed_over || {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            match seen.get(&name) {
                Some((version, since)) if *version == current.resource_version => {
                    since.elapsed() >= current.duration
                }
                _ => {
                    seen.insert(name.clone(), (current.resource_version.clone(), Instant::now()));
                    false
                }
            }
        };
        if !silent_long_enough {
            // Every look at another replica's live claim (a claim attempt or
            // a sweep) leaves this line: what shows a replica saw it and declined.
            tracing::debug!(lease = %name, holder = %current.holder, replica = %self.holder, "the claim's holder has not been silent for a whole lease duration; leaving the claim to it");
            return Ok(Attempt::Held {
                holder: current.holder,
            });
        }
        let taken = LeaseRecord {
            holder: self.holder.clone(),
            duration: self.duration,
            transitions: current.transitions + 1,
            ..current.clone()
        };
        let sent = Instant::now();
        let outcome = match self.api.replace(&taken).await {
            Ok(record) => Some(record),
            // Renewed, or another replica was faster, or our own replace
            // landed and only its answer was lost: the stored Lease says.
            Err(LeaseError::Conflict(_)) => self
                .api
                .get(&name)
                .await?
                .filter(|stored| stored.held_by(&self.holder, taken.transitions)),
            Err(err) => return Err(err),
        };
        self.forget(&name);
        match outcome {
            Some(record) => {
                if handed_over {
                    tracing::info!(lease = %name, epoch = record.transitions, "took over a claim its holder handed over");
                } else {
                    tracing::warn!(lease = %name, from = %current.holder, epoch = record.transitions, "took over a claim whose holder went silent");
                }
                Ok(Attempt::Claimed(self.claim(record, sent)))
            }
            None => Ok(Attempt::Held {
                holder: current.holder,
            }),
        }
    }

    fn forget(&self, name: &str) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    fn claim(&self, record: LeaseRecord, sent: Instant) -> Arc<Claim> {
        let valid_until = sent + validity(record.duration);
        Arc::new(Claim {
            api: self.api.clone(),
            epoch: record.transitions,
            holder: self.holder.clone(),
            state: Mutex::new(ClaimState { record, valid_until }),
            lost: CancellationToken::new(),
        })
    }
}

/// How long a renew sent at some instant keeps a claim valid: the lease
/// duration less a tenth, for the drift between replicas' clock rates.
fn validity(duration: Duration) -> Duration {
    duration - duration / 10
}

/// A held Lease: renew it, fence writes with it, release it.
pub struct Claim {
    api: Arc<dyn LeaseApi>,
    epoch: i32,
    holder: String,
    state: Mutex<ClaimState>,
    lost: CancellationToken,
}

struct ClaimState {
    record: LeaseRecord,
    valid_until: Instant,
}

/// Why a write may not happen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Fenced {
    #[error("the claim on {name} lapsed: it was not renewed in time")]
    Expired { name: String },
    #[error("another replica ({holder}) took {name} over")]
    TakenOver { name: String, holder: String },
    #[error("the claim on {name} cannot be checked: {detail}")]
    Unknown { name: String, detail: String },
}

impl Claim {
    pub fn name(&self) -> String {
        self.state().record.name.clone()
    }

    /// `leaseTransitions` when this claim began: the fencing token.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Cancelled the moment the claim lapses or is taken over: work on the
    /// task stops there.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClaimState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Until when the claim is valid here, as last renewed.
    pub fn valid_until(&self) -> Instant {
        self.state().valid_until
    }

    /// Renews once; a conflict means another replica took the Lease over
    /// (unless the stored Lease shows our own renew landed).
    pub async fn renew(&self) -> Result<(), LeaseError> {
        let record = self.state().record.clone();
        let sent = Instant::now();
        let renewed = match self.api.replace(&record).await {
            Ok(renewed) => renewed,
            Err(LeaseError::Conflict(name)) => match self.api.get(&name).await? {
                Some(stored) if stored.held_by(&self.holder, self.epoch) => stored,
                _ => {
                    self.lost.cancel();
                    return Err(LeaseError::Conflict(name));
                }
            },
            Err(err) => return Err(err),
        };
        let mut state = self.state();
        state.record = renewed;
        state.valid_until = sent + validity(state.record.duration);
        Ok(())
    }

    /// Renews every third of the lease duration until the claim is
    /// released or lost, and declares it lost when its validity runs out.
    pub async fn keep(self: Arc<Self>) {
        let every = self.state().record.duration / 3;
        loop {
            let valid_until = self.state().valid_until;
            tokio::select! {
                () = self.lost.cancelled() => return,
                () = tokio::time::sleep_until(valid_until) => {
                    if self.state().valid_until <= Instant::now() {
                        tracing::warn!(lease = %self.name(), "claim lapsed: not renewed in time; stopping its work");
                        self.lost.cancel();
                        return;
                    }
                }
                () = tokio::time::sleep(every) => {
                    // A call that hangs must not outlast the claim.
                    match tokio::time::timeout_at(valid_until, self.renew()).await {
                        Ok(Ok(())) => {}
                        Ok(Err(err)) => tracing::warn!(lease = %self.name(), error = %err, "claim not renewed"),
                        Err(_) => tracing::warn!(lease = %self.name(), "claim not renewed: the API server did not answer"),
                    }
                }
            }
        }
    }

    /// Before a write to the forge: the claim must still be valid here and
    /// still be this one's on the API server.
    pub async fn fence(&self) -> Result<(), Fenced> {
        let (name, valid_until) = {
            let state = self.state();
            (state.record.name.clone(), state.valid_until)
        };
        if self.lost.is_cancelled() || Instant::now() >= valid_until {
            self.lost.cancel();
            return Err(Fenced::Expired { name });
        }
        let Ok(read) = tokio::time::timeout_at(valid_until, self.api.get(&name)).await else {
            self.lost.cancel();
            return Err(Fenced::Expired { name });
        };
        match read {
            Ok(Some(current)) if current.held_by(&self.holder, self.epoch) => Ok(()),
            Ok(Some(current)) => {
                self.lost.cancel();
                Err(Fenced::TakenOver {
                    name,
                    holder: current.holder,
                })
            }
            Ok(None) => {
                self.lost.cancel();
                Err(Fenced::TakenOver {
                    name,
                    holder: String::new(),
                })
            }
            Err(err) => Err(Fenced::Unknown {
                name,
                detail: err.to_string(),
            }),
        }
    }

    /// The task's journal key.
    pub fn task(&self) -> String {
        self.state().record.task.clone()
    }

    /// Gives the Lease up (the task is over): deleted if still this claim's.
    pub async fn release(&self) -> Result<(), LeaseError> {
        self.lost.cancel();
        let record = self.state().record.clone();
        match self.api.delete(&record.name, &record.resource_version).await {
            Ok(()) | Err(LeaseError::Conflict(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Leaves an unfinished task to the other replicas (this daemon is
    /// stopping): the holder is emptied, so any replica may take it over at
    /// its next sweep instead of waiting out the duration.
    pub async fn hand_over(&self) -> Result<(), LeaseError> {
        self.lost.cancel();
        let record = LeaseRecord {
            holder: String::new(),
            ..self.state().record.clone()
        };
        match self.api.replace(&record).await {
            Ok(_) | Err(LeaseError::Conflict(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests;
