//! A whole task on the Kubernetes sandbox backend: a daemon process with
//! `sandbox.backend: kubernetes` against the fake pod API server (whose
//! pods are network-none Docker containers), one fake GitHub and the
//! scripted model. The model edits through the editor's MCP session and
//! commits through the command executor, both over exec; the branch comes
//! out as tar over exec, and the task ends with one pull request, one
//! progress comment, no pod left, and every body the daemon sent valid
//! against the Kubernetes schemas and free of secrets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::daemon_rig;
use forgehand_test_support::fake_pods;
use forgehand_test_support::github_world;
use forgehand_test_support::kubeconfig;
use forgehand_test_support::scripted_model;

use daemon_rig::{wait_until, DaemonProcess};
use fake_pods::FakePods;
use github_world::{World, REPO};
use scripted_model::edit_and_commit;
use std::time::Duration;

const PODS: &str = "sandbox:\n  backend: \"kubernetes\"\n  kubernetes:\n    namespace: \"default\"\n    start_timeout: \"60s\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_runs_end_to_end_in_a_sandbox_pod() {
    let fake = FakePods::start(common::docker().await, "", true).await;
    let world = World::with_repository(
        edit_and_commit(Duration::from_millis(500)),
        &[("greet.py", "print('Hello')\n"), ("README.md", "# app\n")],
        PODS,
    )
    .await;
    let kube_config = kubeconfig::write_kubeconfig(world.dir.path(), fake.url());
    let log = world.log_path();
    let issue = world.labelled_issue("Greet the world");
    let mut env: Vec<(&str, String)> = world.env().to_vec();
    env.push(("KUBECONFIG", kube_config.display().to_string()));
    let mut daemon = DaemonProcess::start(&world.config, &["run"], &env, &log);

    wait_until(
        "a sandbox pod",
        Duration::from_secs(120),
        async || !fake.pods().is_empty(),
        &log,
    )
    .await;
    world.wait_for_end(issue).await;
    let gh = &world.github;
    world.assert_delivered_once(issue);
    let pulls = gh.pulls(REPO);
    assert_eq!(pulls.len(), 1, "exactly one pull request");
    // The branch holds the model's edit and commit, made in the pod.
    let branch = pulls[0].head.clone();
    let shown = std::process::Command::new("git")
        .arg("-C")
        .arg(&world.bare)
        .args(["show", &format!("{branch}:greet.py")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "print('Hello, world')\n");
    wait_until(
        "the pod deleted",
        Duration::from_secs(20),
        async || fake.pods().is_empty(),
        &log,
    )
    .await;
    assert!(fake.execs() > 3, "the editor, commands and copies ran over exec");
    daemon.terminate();

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("sandboxes run as pods"), "{text}");
    assert!(text.contains("sandbox pod ready"), "{text}");
    // No secret in any body sent to the cluster (pod env included).
    let bodies = fake.bodies();
    assert!(bodies.iter().any(|b| b["kind"] == "Pod"));
    for body in &bodies {
        let body = body.to_string();
        for (_, secret) in world.env() {
            if secret.starts_with("http") {
                continue;
            }
            assert!(!body.contains(&secret), "a secret in {body}");
        }
    }
    fake.cleanup().await;
}
