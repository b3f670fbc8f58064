//! Daemon processes in `cluster.mode: kubernetes` against the fake Lease
//! API server, one fake GitHub and the scripted model: a labelled issue is
//! claimed by exactly one replica; the holder killed with SIGKILL mid-task
//! is taken over by the other once its Lease runs out, and in the end there
//! is one pull request, one progress comment, and no Lease left. A replica
//! cut off from the API server mid-task stops at its renew deadline and
//! writes nothing to the forge after it; another finishes the task once.
//! Three replicas deliver twelve issues, each exactly once, while the API
//! server answers 500 and 429 at random.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::fake_kube;
use forgehand_test_support::github_world;
use forgehand_test_support::kubeconfig;
use forgehand_test_support::scripted_model;

use daemon_rig::{wait_until, DaemonProcess};
use fake_kube::FakeKube;
use github_world::{World, REPO};
use scripted_model::edit_and_commit;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub(crate) const CLUSTER: &str =
    "cluster:\n  mode: \"kubernetes\"\n  namespace: \"default\"\n  lease_duration: \"3s\"\n";

/// Replica `n` of the world: its own state folder and log.
pub(crate) fn replica(world: &World, kube_config: &Path, n: usize) -> DaemonProcess {
    replica_with(world, kube_config, n, &[])
}

/// Replica `n`, with `extra` in its environment.
pub(crate) fn replica_with(
    world: &World,
    kube_config: &Path,
    n: usize,
    extra: &[(&'static str, String)],
) -> DaemonProcess {
    let config = world.dir.path().join(format!("config-{n}.yaml"));
    let state = world.dir.path().join("state");
    let text = std::fs::read_to_string(&world.config)
        .unwrap()
        .replace(&state.display().to_string(), &format!("{}-{n}", state.display()))
        // Replicas sharing an engine need instance ids of their own.
        .replace(
            &format!("instance_id: \"{}\"", world.instance),
            &format!("instance_id: \"{}-{n}\"", world.instance),
        )
        .replacen("daemon:\n", "daemon:\n  max_concurrent_tasks: 4\n", 1);
    std::fs::write(&config, text).unwrap();
    let mut env: Vec<(&str, String)> = world.env().to_vec();
    env.push(("KUBECONFIG", kube_config.display().to_string()));
    env.push(("HOSTNAME", format!("replica-{n}")));
    env.extend(extra.iter().cloned());
    DaemonProcess::start(&config, &["run"], &env, &world.log_path())
}

/// Whether the replica whose holder identity starts with `replica` logged
/// that it saw `holder`'s claim live and left it (src/replicas/lease.rs).
fn declined_by(log: &Path, replica: &str, holder: &str) -> bool {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .any(|line| {
            line.contains("leaving the claim to it")
                && line.contains(&format!("holder={holder}"))
                && line.contains(&format!("replica={replica}"))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_task_is_taken_over_and_the_task_ends_once() {
    let kube = FakeKube::start().await;
    let world = World::with_repository(
        edit_and_commit(Duration::from_secs(3)),
        &[("greet.py", "print('Hello')\n"), ("README.md", "# app\n")],
        CLUSTER,
    )
    .await;
    let kube_config = kubeconfig::write_kubeconfig(world.dir.path(), &kube.url());
    let log = world.log_path();
    let gh = &world.github;
    let issue = world.labelled_issue("Greet the world");

    let mut first = replica(&world, &kube_config, 1);
    wait_until(
        "a model request",
        Duration::from_secs(120),
        async || !world.model.requests().await.is_empty(),
        &log,
    )
    .await;
    let leases = kube.leases();
    assert_eq!(leases.len(), 1, "one Lease for the task");
    assert_eq!(
        leases[0]["spec"]["holderIdentity"]
            .as_str()
            .unwrap()
            .split('-')
            .nth(1),
        Some("1")
    );
    // The second replica starts while the first works: it must not start
    // the task too. Its log shows it looked at the Lease and left it to
    // the first (the first never weighs its own claim).
    let mut second = replica(&world, &kube_config, 2);
    let holder = leases[0]["spec"]["holderIdentity"].as_str().unwrap().to_owned();
    wait_until(
        "the second replica seeing the first's claim and leaving it",
        Duration::from_secs(60),
        async || declined_by(&log, "replica-2-", &holder),
        &log,
    )
    .await;
    assert_eq!(
        kube.lease("default", leases[0]["metadata"]["name"].as_str().unwrap())
            .unwrap()["spec"]["holderIdentity"],
        leases[0]["spec"]["holderIdentity"],
        "the second replica took a renewed claim"
    );
    first.kill9();

    world.wait_for_end(issue).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("took over a claim whose holder went silent"),
        "{text}"
    );
    world.assert_delivered_once(issue);
    assert_eq!(gh.pulls(REPO).len(), 1, "exactly one pull request");
    wait_until(
        "the Lease released",
        Duration::from_secs(20),
        async || kube.leases().is_empty(),
        &log,
    )
    .await;
    second.terminate();
    // The killed replica's sandbox is its own (another daemon never reaps
    // it); a restart of that replica would.
    for id in daemon_rig::containers_of(&format!("{}-1", world.instance)) {
        std::process::Command::new("docker")
            .args(["rm", "-fv", &id])
            .output()
            .unwrap();
    }
    // Every Lease body the product sent carried the task's key and no secret.
    for body in kube.bodies().into_iter().filter(|b| b.get("spec").is_some()) {
        let body = body.to_string();
        assert!(body.contains("github:acme/app:issue:"), "{body}");
        for (_, secret) in world.env() {
            if secret.starts_with("http") {
                continue;
            }
            assert!(!body.contains(&secret));
        }
    }
}

/// A TCP relay on loopback in front of the API server that can be cut:
/// from then on, open connections are dropped and new ones refused, as a
/// replica on the far side of a network partition sees it.
struct CuttableLink {
    url: String,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl CuttableLink {
    async fn start(upstream: &str) -> CuttableLink {
        let target = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let relays = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let relay = tokio::spawn(async move {
                    let mut outbound = TcpStream::connect(&target).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
                relays.lock().unwrap().push(relay);
            }
        });
        tasks.lock().unwrap().push(accept);
        CuttableLink { url, tasks }
    }

    fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Every ref of the bare repository with its commit.
fn refs(bare: &Path) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["for-each-ref", "--format=%(refname) %(objectname)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// Forge writes (anything but reads) the fake GitHub has seen so far.
fn forge_writes(world: &World) -> Vec<String> {
    world
        .github
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET ") && !r.starts_with("HEAD "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_the_api_server_stops_at_its_deadline_and_writes_nothing_after_it() {
    let kube = FakeKube::start().await;
    let world = World::with_repository(
        edit_and_commit(Duration::from_secs(3)),
        &[("greet.py", "print('Hello')\n"), ("README.md", "# app\n")],
        CLUSTER,
    )
    .await;
    let link = CuttableLink::start(&kube.url()).await;
    let dir = world.dir.path();
    std::fs::create_dir_all(dir.join("cut")).unwrap();
    let cut_off_config = kubeconfig::write_kubeconfig(&dir.join("cut"), &link.url);
    let kube_config = kubeconfig::write_kubeconfig(dir, &kube.url());
    let log = world.log_path();
    let gh = &world.github;
    let issue = world.labelled_issue("Greet the world");

    let mut first = replica(&world, &cut_off_config, 1);
    // The first turn edits; the second is the model thinking for 3 s.
    wait_until(
        "a model request",
        Duration::from_secs(120),
        async || !world.model.requests().await.is_empty(),
        &log,
    )
    .await;
    link.cut();
    let cut = Instant::now();
    // The last renew was at or before the cut, so the claim is valid for
    // at most 0.9 of the 3 s lease duration from here.
    tokio::time::sleep_until((cut + Duration::from_secs(3)).into()).await;
    let writes = forge_writes(&world);
    let pushed = refs(&world.bare);
    let asked = world.model.requests().await.len();
    wait_until(
        "the cut-off replica to give its sandbox up",
        Duration::from_secs(20),
        async || daemon_rig::containers_of(&format!("{}-1", world.instance)).is_empty(),
        &log,
    )
    .await;
    // Long enough for anything the cut-off replica still had in flight
    // (the model answers at 3 s) to have shown; nobody else runs yet.
    tokio::time::sleep_until((cut + Duration::from_secs(8)).into()).await;
    assert_eq!(
        forge_writes(&world),
        writes,
        "a forge write after the renew deadline"
    );
    assert_eq!(refs(&world.bare), pushed, "a push after the renew deadline");
    assert_eq!(
        world.model.requests().await.len(),
        asked,
        "work after the renew deadline"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("claim lapsed: not renewed in time"), "{text}");

    // Another replica takes the silent Lease over and finishes the task once.
    let mut second = replica(&world, &kube_config, 2);
    world.wait_for_end(issue).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("took over a claim whose holder went silent"),
        "{text}"
    );
    world.assert_delivered_once(issue);
    assert_eq!(gh.pulls(REPO).len(), 1, "exactly one pull request");
    assert!(second.terminate().success());
    // Cut off, the first replica still shuts down when asked.
    assert!(first.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_deliver_twelve_issues_each_once_while_the_api_fails_at_random() {
    let kube = FakeKube::start().await;
    let world = World::with_repository(
        edit_and_commit(Duration::from_millis(200)),
        &[("greet.py", "print('Hello')\n"), ("README.md", "# app\n")],
        "cluster:\n  mode: \"kubernetes\"\n  namespace: \"default\"\n  lease_duration: \"8s\"\n",
    )
    .await;
    let kube_config = kubeconfig::write_kubeconfig(world.dir.path(), &kube.url());
    let log = world.log_path();
    let gh = &world.github;
    let issues: Vec<u64> = (0..12)
        .map(|i| world.labelled_issue(&format!("Greet the world ({i})")))
        .collect();
    let mut replicas: Vec<DaemonProcess> = (1..=3).map(|n| replica(&world, &kube_config, n)).collect();
    // One Lease call in five answers 500 or 429 until the work is done.
    let faults = {
        let kube = kube.clone();
        tokio::spawn(async move {
            for i in 0u32.. {
                tokio::time::sleep(Duration::from_millis(150)).await;
                kube.fail_next(1, if i % 2 == 0 { 500 } else { 429 });
            }
        })
    };
    for &n in &issues {
        world.wait_for_end(n).await;
    }
    faults.abort();
    for &n in &issues {
        world.assert_delivered_once(n);
    }
    assert_eq!(gh.pulls(REPO).len(), 12);
    // The work was shared: more than one replica held a Lease.
    let text = std::fs::read_to_string(&log).unwrap();
    let holders: std::collections::BTreeSet<&str> = ["replica-1", "replica-2", "replica-3"]
        .into_iter()
        .filter(|r| {
            kube.bodies().iter().any(|b| {
                b["spec"]["holderIdentity"]
                    .as_str()
                    .is_some_and(|h| h.contains(r))
            })
        })
        .collect();
    assert!(
        holders.len() >= 2,
        "one replica did everything: {holders:?}\n{text}"
    );
    wait_until(
        "every Lease released",
        Duration::from_secs(30),
        async || kube.leases().is_empty(),
        &log,
    )
    .await;
    for replica in &mut replicas {
        assert!(replica.terminate().success());
    }
}
