#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Leases in memory with real resourceVersion semantics: create refuses a
/// taken name, replace and delete refuse a stale version.
#[derive(Default)]
struct Store {
    leases: Mutex<HashMap<String, LeaseRecord>>,
    next_version: AtomicU64,
}

/// One replica's connection to the store; `cut` makes every call fail as
/// an unreachable API server would.
struct Link {
    store: Arc<Store>,
    cut: AtomicBool,
}

impl Link {
    fn new(store: &Arc<Store>) -> Arc<Link> {
        Arc::new(Link {
            store: store.clone(),
            cut: AtomicBool::new(false),
        })
    }

    fn reachable(&self) -> Result<(), LeaseError> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(LeaseError::Api {
                detail: "connection refused".into(),
                retryable: true,
            });
        }
        Ok(())
    }

    fn version(&self) -> String {
        (self.store.next_version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }
}

#[async_trait]
impl LeaseApi for Link {
    async fn create(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
        self.reachable()?;
        let mut leases = self.store.leases.lock().unwrap();
        if leases.contains_key(&lease.name) {
            return Err(LeaseError::AlreadyExists(lease.name.clone()));
        }
        let stored = LeaseRecord {
            resource_version: self.version(),
            ..lease.clone()
        };
        leases.insert(lease.name.clone(), stored.clone());
        Ok(stored)
    }

    async fn get(&self, name: &str) -> Result<Option<LeaseRecord>, LeaseError> {
        self.reachable()?;
        Ok(self.store.leases.lock().unwrap().get(name).cloned())
    }

    async fn replace(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
        self.reachable()?;
        let mut leases = self.store.leases.lock().unwrap();
        match leases.get(&lease.name) {
            Some(current) if current.resource_version == lease.resource_version => {
                let stored = LeaseRecord {
                    resource_version: self.version(),
                    ..lease.clone()
                };
                leases.insert(lease.name.clone(), stored.clone());
                Ok(stored)
            }
            _ => Err(LeaseError::Conflict(lease.name.clone())),
        }
    }

    async fn delete(&self, name: &str, resource_version: &str) -> Result<(), LeaseError> {
        self.reachable()?;
        let mut leases = self.store.leases.lock().unwrap();
        match leases.get(name) {
            Some(current) if current.resource_version == resource_version => {
                leases.remove(name);
                Ok(())
            }
            Some(_) => Err(LeaseError::Conflict(name.to_owned())),
            None => Ok(()),
        }
    }

    async fn list(&self) -> Result<Vec<LeaseRecord>, LeaseError> {
        self.reachable()?;
        Ok(self.store.leases.lock().unwrap().values().cloned().collect())
    }
}

const DURATION: Duration = Duration::from_secs(15);

fn replica(store: &Arc<Store>, name: &str) -> (Claimer, Arc<Link>) {
    let link = Link::new(store);
    (Claimer::new(link.clone(), name, DURATION), link)
}

fn claimed(attempt: Attempt) -> Arc<Claim> {
    match attempt {
        Attempt::Claimed(claim) => claim,
        Attempt::Held { holder } => panic!("held by {holder:?}"),
    }
}

fn held(attempt: &Attempt) -> bool {
    matches!(attempt, Attempt::Held { .. })
}

#[tokio::test(start_paused = true)]
async fn of_replicas_racing_for_a_task_exactly_one_claims_it() {
    let store = Arc::new(Store::default());
    let replicas: Vec<_> = (0..3).map(|i| replica(&store, &format!("r{i}")).0).collect();
    let attempts = futures_util::future::join_all(
        replicas
            .iter()
            .map(|r| r.try_claim("github-acme-app-issue-7", "github:acme/app#issue/7")),
    )
    .await;
    let winners = attempts
        .into_iter()
        .filter(|a| matches!(a, Ok(Attempt::Claimed(_))))
        .count();
    assert_eq!(winners, 1);
}

#[tokio::test(start_paused = true)]
async fn a_renewed_claim_is_never_taken_over() {
    let store = Arc::new(Store::default());
    let (first, _) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    let claim = claimed(first.try_claim("t", "task").await.unwrap());
    let keeping = tokio::spawn(claim.clone().keep());
    for _ in 0..10 {
        assert!(held(&second.try_claim("t", "task").await.unwrap()));
        tokio::time::sleep(DURATION / 2).await;
    }
    assert!(!claim.lost().is_cancelled());
    claim.fence().await.unwrap();
    claim.release().await.unwrap();
    keeping.await.unwrap();
    // Released: the next claim is a fresh one, epoch 0.
    assert_eq!(claimed(second.try_claim("t", "task").await.unwrap()).epoch(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_silent_holder_is_taken_over_only_after_a_whole_duration_unchanged() {
    let store = Arc::new(Store::default());
    let (first, _) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    // The first replica claims and then dies: it never renews.
    let dead = claimed(first.try_claim("t", "task").await.unwrap());
    assert!(held(&second.try_claim("t", "task").await.unwrap()));
    tokio::time::sleep(DURATION - Duration::from_millis(1)).await;
    assert!(
        held(&second.try_claim("t", "task").await.unwrap()),
        "not a moment early"
    );
    tokio::time::sleep(Duration::from_millis(1)).await;
    let taken = claimed(second.try_claim("t", "task").await.unwrap());
    assert_eq!(taken.epoch(), 1);
    taken.fence().await.unwrap();
    // The old claim lapsed long before, and is fenced off in any case.
    assert!(matches!(dead.fence().await, Err(Fenced::Expired { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_renews_while_watched_restarts_the_watch() {
    let store = Arc::new(Store::default());
    let (first, _) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    let claim = claimed(first.try_claim("t", "task").await.unwrap());
    assert!(held(&second.try_claim("t", "task").await.unwrap()));
    tokio::time::sleep(DURATION * 2 / 3).await;
    claim.renew().await.unwrap();
    tokio::time::sleep(DURATION * 2 / 3).await;
    // 1.33 durations since the first look, but the version changed midway.
    assert!(held(&second.try_claim("t", "task").await.unwrap()));
}

#[tokio::test(start_paused = true)]
async fn of_two_replicas_taking_over_at_once_one_wins() {
    let store = Arc::new(Store::default());
    let (first, _) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    let (third, _) = replica(&store, "third");
    let _dead = claimed(first.try_claim("t", "task").await.unwrap());
    assert!(held(&second.try_claim("t", "task").await.unwrap()));
    assert!(held(&third.try_claim("t", "task").await.unwrap()));
    tokio::time::sleep(DURATION).await;
    let (a, b) = tokio::join!(second.try_claim("t", "task"), third.try_claim("t", "task"));
    let winners = [a.unwrap(), b.unwrap()].iter().filter(|a| !held(a)).count();
    assert_eq!(winners, 1);
    assert_eq!(store.leases.lock().unwrap()["t"].transitions, 1);
}

#[tokio::test(start_paused = true)]
async fn a_replica_cut_off_stops_before_anyone_can_take_over() {
    let store = Arc::new(Store::default());
    let (first, link) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    let claim = claimed(first.try_claim("t", "task").await.unwrap());
    let keeping = tokio::spawn(claim.clone().keep());
    tokio::time::sleep(DURATION / 2).await;
    // Renewed once at a third; the second replica starts watching now.
    assert!(held(&second.try_claim("t", "task").await.unwrap()));
    let watch_started = Instant::now();
    link.cut.store(true, Ordering::SeqCst);
    claim.lost().cancelled().await;
    let stopped = Instant::now();
    keeping.await.unwrap();
    assert!(matches!(claim.fence().await, Err(Fenced::Expired { .. })));
    loop {
        if let Attempt::Claimed(taken) = second.try_claim("t", "task").await.unwrap() {
            assert_eq!(taken.epoch(), 1);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let taken_over = Instant::now();
    assert!(
        stopped < taken_over,
        "stopped {:?} after the watch began, taken over {:?} after",
        stopped - watch_started,
        taken_over - watch_started
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_taken_over_is_fenced_and_its_renewal_sees_it() {
    let store = Arc::new(Store::default());
    let (first, link) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    let claim = claimed(first.try_claim("t", "task").await.unwrap());
    // Partitioned long enough for a takeover, then back.
    link.cut.store(true, Ordering::SeqCst);
    assert!(held(&second.try_claim("t", "task").await.unwrap()));
    tokio::time::sleep(DURATION).await;
    let taken = claimed(second.try_claim("t", "task").await.unwrap());
    link.cut.store(false, Ordering::SeqCst);
    assert!(matches!(claim.renew().await, Err(LeaseError::Conflict(_))));
    assert!(claim.lost().is_cancelled());
    assert!(claim.fence().await.is_err());
    // Releasing the lapsed claim leaves the new holder's Lease alone.
    claim.release().await.unwrap();
    taken.fence().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_fence_that_finds_another_holder_names_it() {
    let store = Arc::new(Store::default());
    let (first, _) = replica(&store, "first");
    let claim = claimed(first.try_claim("t", "task").await.unwrap());
    {
        let mut leases = store.leases.lock().unwrap();
        let lease = leases.get_mut("t").unwrap();
        lease.holder = "usurper".into();
        lease.transitions += 1;
    }
    assert_eq!(
        claim.fence().await,
        Err(Fenced::TakenOver {
            name: "t".into(),
            holder: "usurper".into()
        })
    );
    assert!(claim.lost().is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn a_handed_over_claim_is_taken_over_at_once() {
    let store = Arc::new(Store::default());
    let (first, _) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    let claim = claimed(first.try_claim("t", "task").await.unwrap());
    claim.hand_over().await.unwrap();
    assert!(claim.lost().is_cancelled());
    let listed = second.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].task, "task");
    let taken = claimed(second.take_over_if_silent(listed[0].clone()).await.unwrap());
    assert_eq!(taken.epoch(), 1);
    assert_eq!(taken.task(), "task");
    assert!(claim.fence().await.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_answer_was_lost_is_found_to_be_ours() {
    let store = Arc::new(Store::default());
    let (first, link) = replica(&store, "first");
    let (second, _) = replica(&store, "second");
    // The create landed but its answer did not arrive: the retry finds
    // the Lease taken, and it is this replica's own.
    link.create(&LeaseRecord {
        name: "t".into(),
        resource_version: String::new(),
        holder: "first".into(),
        duration: DURATION,
        transitions: 0,
        task: "task".into(),
    })
    .await
    .unwrap();
    let claim = claimed(first.try_claim("t", "task").await.unwrap());
    claim.fence().await.unwrap();
    assert!(held(&second.try_claim("t", "task").await.unwrap()));
    // A renew that landed unanswered: the next one carries a stale
    // version, and the stored Lease shows it is still ours.
    let stale = store.leases.lock().unwrap()["t"].clone();
    link.replace(&stale).await.unwrap();
    claim.renew().await.unwrap();
    assert!(!claim.lost().is_cancelled());
    claim.renew().await.unwrap();
}
