//! Kubernetes benchmarks against the tests' fake API servers on loopback:
//! - claim latency: 3 replicas race for each new task's Lease (create; 409
//!   for the losers), time until all three have their answer;
//! - pod sandbox ready: create the pod -> it runs (a real Docker container
//!   standing in) -> the editor checked and the supervisor started over
//!   exec, without and with a 10 MB workspace copied in as tar over exec.
//!   Pod scheduling and image pulls are the cluster's cost, not measured.
//!
//! Run: `cargo bench --bench cluster` (needs the engine and the base image,
//! as `cargo bench --bench sandbox`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand_test_support::fake_kube;
use forgehand_test_support::fake_pods;
use forgehand_test_support::stats;

use forgehand_test_support::sample_workspace as workspace;

use forgehand::config::{Config, KubeSandboxConfig};
use forgehand::images;
use forgehand::replicas::kube_leases::KubeLeases;
use forgehand::replicas::lease::{Attempt, Claimer};
use forgehand::sandbox::helper::EditorBinary;
use forgehand::sandbox::kubernetes::KubernetesBackend;
use forgehand::sandbox::{SandboxBackend, SandboxSpec};
use stats::report;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workspace::make_workspace;

#[tokio::main]
async fn main() {
    println!(
        "forgehand cluster benchmarks ({} cores); reproduce with: cargo bench --bench cluster",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );
    claim_latency().await;
    pod_ready().await;
}

async fn claim_latency() {
    let kube = fake_kube::FakeKube::start().await;
    let replicas: Vec<Arc<Claimer>> = (0..3)
        .map(|i| {
            let api = Arc::new(KubeLeases::new(kube.client(), "default", "forgehand"));
            Arc::new(Claimer::new(api, format!("replica-{i}"), Duration::from_secs(30)))
        })
        .collect();
    let mut latencies = Vec::new();
    for task in 0..200 {
        let started = Instant::now();
        let races: Vec<_> = replicas
            .iter()
            .map(|replica| {
                let replica = replica.clone();
                tokio::spawn(async move {
                    let name = format!("forgehand-github-acme-app-issue-{task}");
                    let attempt = replica
                        .try_claim(&name, &format!("github:acme/app#issue/{task}"))
                        .await
                        .unwrap();
                    matches!(attempt, Attempt::Claimed(_))
                })
            })
            .collect();
        let mut winners = 0;
        for race in races {
            winners += usize::from(race.await.unwrap());
        }
        latencies.push(started.elapsed());
        assert_eq!(winners, 1, "task {task} claimed exactly once");
    }
    report(
        "claim, 3 replicas contending (all three answered)",
        &mut latencies,
    );
}

async fn pod_ready() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = Config::load(&root.join("config.yaml")).expect("config.yaml loads");
    let docker = forgehand::sandbox::docker::connect(&config.docker)
        .await
        .expect("Docker is reachable (run scripts/dev-env.sh)");
    let image = images::image_tag(&config.images, "base");
    assert!(
        images::image_present(&docker, &image).await.unwrap(),
        "{image} is missing; run `cargo run -- images build base`"
    );
    let editor = EditorBinary::locate(config.text_editor_mcp.editor_binary.as_deref())
        .expect("forgehand-editor is built (scripts/build-editor; FORGEHAND_EDITOR_BINARY)");
    let fake = fake_pods::FakePods::start(docker, "", true).await;
    let pods = KubeSandboxConfig {
        namespace: String::new(),
        registry: String::new(),
        pull_policy: "IfNotPresent".into(),
        pull_secrets: Vec::new(),
        runtime_class: None,
        ephemeral_storage: 2 << 30,
        workspace_size: 1 << 30,
        active_deadline: Duration::from_secs(3600),
        start_timeout: Duration::from_secs(60),
    };
    let backend = KubernetesBackend::with_client(
        fake.client(),
        config.sandbox.clone(),
        pods,
        format!("bench-{}", std::process::id()),
    )
    .with_editor(editor);
    let workspace = tempfile::tempdir().unwrap();
    make_workspace(workspace.path());
    let spec = |i: usize| SandboxSpec {
        task_id: format!("bench-{i}"),
        forge: "local".into(),
        repository: "bench/workspace".into(),
        image: image.clone(),
        env: Vec::new(),
    };
    backend
        .prepare(&spec(0), None)
        .await
        .unwrap()
        .remove()
        .await
        .unwrap();
    for (label, with_workspace) in [
        (
            "pod sandbox ready on the fake (create -> running -> exec ready)",
            false,
        ),
        (
            "the same, with a 10 MB workspace (200 files) copied in over exec",
            true,
        ),
    ] {
        let mut ready = Vec::new();
        for i in 1..=15 {
            let started = Instant::now();
            let sandbox = backend
                .prepare(&spec(i), with_workspace.then_some(workspace.path()))
                .await
                .unwrap();
            ready.push(started.elapsed());
            assert!(sandbox.egress().is_some(), "the supervisor runs");
            sandbox.remove().await.unwrap();
        }
        report(label, &mut ready);
    }
    let sandbox = backend.prepare(&spec(100), Some(workspace.path())).await.unwrap();
    let mut exec = Vec::new();
    for _ in 0..500 {
        let started = Instant::now();
        let out = sandbox.exec("true", None).await.unwrap();
        assert!(out.success(), "{out:?}");
        exec.push(started.elapsed());
    }
    report("pod: supervised round trip of `true`", &mut exec);
    sandbox.remove().await.unwrap();
    fake.cleanup().await;
}
