//! The claim protocol over a real `kube` client against the fake API
//! server: the Lease calls keep Kubernetes' semantics (409 AlreadyExists,
//! 409 Conflict on a stale resourceVersion or delete precondition, label
//! selectors), replicas racing for tasks each get a task exactly once, a
//! handed-over task is taken over at once, and an API server answering
//! 500 and 429 costs retries, never a duplicate claim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::fake_kube;

use fake_kube::FakeKube;
use forgehand::replicas::kube_leases::KubeLeases;
use forgehand::replicas::lease::{Attempt, Claimer, LeaseApi, LeaseError, LeaseRecord};
use std::sync::Arc;
use std::time::Duration;

const DURATION: Duration = Duration::from_secs(15);

fn record(name: &str, holder: &str) -> LeaseRecord {
    LeaseRecord {
        name: name.into(),
        resource_version: String::new(),
        holder: holder.into(),
        duration: DURATION,
        transitions: 0,
        task: format!("github:acme/app#issue/{name}"),
    }
}

#[tokio::test]
async fn lease_calls_keep_kubernetes_semantics() {
    let kube = FakeKube::start().await;
    let api = KubeLeases::new(kube.client(), "default", "forgehand");
    let created = api.create(&record("t1", "a")).await.unwrap();
    assert!(!created.resource_version.is_empty());
    assert_eq!(created.task, "github:acme/app#issue/t1");
    assert!(matches!(
        api.create(&record("t1", "b")).await,
        Err(LeaseError::AlreadyExists(_))
    ));
    let renewed = api.replace(&created).await.unwrap();
    assert_ne!(renewed.resource_version, created.resource_version);
    // The version read before the renew is stale now.
    assert!(matches!(
        api.replace(&created).await,
        Err(LeaseError::Conflict(_))
    ));
    assert!(matches!(
        api.delete("t1", &created.resource_version).await,
        Err(LeaseError::Conflict(_))
    ));
    assert_eq!(api.get("t1").await.unwrap().unwrap().holder, "a");
    // Another installation's Lease in the same namespace is not listed.
    let other = KubeLeases::new(kube.client(), "default", "other");
    other.create(&record("t2", "c")).await.unwrap();
    let listed = api.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "t1");
    api.delete("t1", &renewed.resource_version).await.unwrap();
    assert!(api.get("t1").await.unwrap().is_none());
    // Deleting what is gone is fine; replacing it is not ours any more.
    api.delete("t1", &renewed.resource_version).await.unwrap();
    assert!(matches!(
        api.replace(&renewed).await,
        Err(LeaseError::Conflict(_))
    ));

    // What the product sends is a Lease as the API defines it.
    let stored = kube.lease("default", "t2").unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "c");
    assert_eq!(stored["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(stored["spec"]["leaseTransitions"], 0);
    assert_eq!(
        stored["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "forgehand"
    );
    assert_eq!(
        stored["metadata"]["annotations"]["io.forgehand/task"],
        "github:acme/app#issue/t2"
    );
    assert!(stored["spec"]["renewTime"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn three_replicas_racing_for_twelve_tasks_claim_each_exactly_once() {
    let kube = FakeKube::start().await;
    let replicas: Vec<Arc<Claimer>> = (0..3)
        .map(|i| {
            let api = Arc::new(KubeLeases::new(kube.client(), "default", "forgehand"));
            Arc::new(Claimer::new(api, format!("replica-{i}"), DURATION))
        })
        .collect();
    let mut races = Vec::new();
    for task in 0..12 {
        for replica in &replicas {
            let replica = replica.clone();
            races.push(tokio::spawn(async move {
                let name = format!("forgehand-github-acme-app-issue-{task}");
                match replica
                    .try_claim(&name, &format!("github:acme/app#issue/{task}"))
                    .await
                    .unwrap()
                {
                    Attempt::Claimed(claim) => Some((task, claim.epoch())),
                    Attempt::Held { .. } => None,
                }
            }));
        }
    }
    let mut won: Vec<(i32, i32)> = Vec::new();
    for race in races {
        if let Some(w) = race.await.unwrap() {
            won.push(w);
        }
    }
    won.sort();
    assert_eq!(won, (0..12).map(|t| (t, 0)).collect::<Vec<_>>());
    assert_eq!(kube.leases().len(), 12);
    // Every Lease body sent is valid against the Kubernetes schemas.
    let bodies: Vec<serde_json::Value> = kube
        .bodies()
        .into_iter()
        .filter(|b| b["kind"] == "Lease")
        .collect();
    assert!(bodies.len() >= 12);
    common::kube_validate(&bodies);
}

#[tokio::test]
async fn a_task_handed_over_is_taken_over_at_the_next_sweep() {
    let kube = FakeKube::start().await;
    let api = || Arc::new(KubeLeases::new(kube.client(), "default", "forgehand"));
    let first = Claimer::new(api(), "first", DURATION);
    let second = Claimer::new(api(), "second", DURATION);
    let Attempt::Claimed(claim) = first
        .try_claim("forgehand-t", "github:acme/app#issue/1")
        .await
        .unwrap()
    else {
        panic!("not claimed");
    };
    claim.hand_over().await.unwrap();
    let listed = second.list().await.unwrap();
    let Attempt::Claimed(taken) = second.take_over_if_silent(listed[0].clone()).await.unwrap() else {
        panic!("a handed-over task was not taken over");
    };
    assert_eq!(taken.epoch(), 1);
    assert_eq!(taken.task(), "github:acme/app#issue/1");
    taken.fence().await.unwrap();
    assert!(claim.fence().await.is_err());
    let stored = kube.lease("default", "forgehand-t").unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "second");
    assert_eq!(stored["spec"]["leaseTransitions"], 1);
}

#[tokio::test]
async fn an_api_server_answering_500_and_429_costs_retries_not_duplicates() {
    let kube = FakeKube::start().await;
    let api = || Arc::new(KubeLeases::new(kube.client(), "default", "forgehand"));
    let first = Claimer::new(api(), "first", DURATION);
    let second = Claimer::new(api(), "second", DURATION);
    kube.fail_next(2, 500);
    let Attempt::Claimed(claim) = first.try_claim("forgehand-t", "task").await.unwrap() else {
        panic!("not claimed");
    };
    kube.fail_next(2, 429);
    assert!(matches!(
        second.try_claim("forgehand-t", "task").await.unwrap(),
        Attempt::Held { .. }
    ));
    kube.fail_next(1, 503);
    claim.renew().await.unwrap();
    claim.fence().await.unwrap();
    // Past the retries: a clear, retryable error, and nothing claimed.
    kube.fail_next(50, 500);
    let err = second.try_claim("forgehand-u", "task").await.err().unwrap();
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("500"), "{err}");
    assert_eq!(kube.leases().len(), 1);
}

#[tokio::test]
async fn clocks_set_apart_by_minutes_change_nothing() {
    let kube = FakeKube::start().await;
    let api = || Arc::new(KubeLeases::new(kube.client(), "default", "forgehand"));
    let short = Duration::from_secs(3);
    let behind = Claimer::new(api(), "behind", short);
    let watcher = Claimer::new(api(), "watcher", short);
    let Attempt::Claimed(claim) = behind.try_claim("forgehand-t", "task").await.unwrap() else {
        panic!("not claimed");
    };
    // The holder's clock is ten minutes behind: its Lease looks long
    // expired by timestamps, yet it renews, so it keeps the task.
    kube.skew_times("default", "forgehand-t", -600);
    let seen = watcher.list().await.unwrap();
    assert!(matches!(
        watcher.take_over_if_silent(seen[0].clone()).await.unwrap(),
        Attempt::Held { .. }
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    claim.renew().await.unwrap();
    kube.skew_times("default", "forgehand-t", -600);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let seen = watcher.list().await.unwrap();
    assert!(
        matches!(
            watcher.take_over_if_silent(seen[0].clone()).await.unwrap(),
            Attempt::Held { .. }
        ),
        "a renewing holder is never taken over, whatever its clock says"
    );
    claim.fence().await.unwrap();

    // Now its clock is ten minutes ahead and it goes silent: the Lease
    // looks fresh by timestamps, yet it is taken over once it stayed
    // unchanged for a whole duration on the watcher's clock.
    kube.skew_times("default", "forgehand-t", 600);
    let seen = watcher.list().await.unwrap();
    let _ = watcher.take_over_if_silent(seen[0].clone()).await.unwrap();
    tokio::time::sleep(short + Duration::from_millis(300)).await;
    let seen = watcher.list().await.unwrap();
    let Attempt::Claimed(taken) = watcher.take_over_if_silent(seen[0].clone()).await.unwrap() else {
        panic!("a silent holder with a clock ahead was not taken over");
    };
    assert_eq!(taken.epoch(), 1);
    assert!(claim.fence().await.is_err(), "the old holder is fenced off");
}
