//! The Kubernetes sandbox backend against the fake API server, whose pods
//! are real Docker containers (network `none`): a pod that passes the
//! `restricted` Pod Security Standard, tar copies in and out over exec
//! (with the v5 end-of-stdin frame, and the v4 fallback), commands with
//! real exit codes and timeouts, streamed processes, an image that cannot
//! be pulled, leftovers replaced and reaped; every body the backend sends
//! validated against the Kubernetes OpenAPI schemas.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::fake_pods;
use forgehand_test_support::sandbox_tree;

use fake_pods::FakePods;
use forgehand::config::KubeSandboxConfig;
use forgehand::sandbox::kubernetes::KubernetesBackend;
use forgehand::sandbox::{SandboxBackend, SandboxError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REGISTRY: &str = "registry.test:5000/team";

fn pods_config() -> KubeSandboxConfig {
    KubeSandboxConfig {
        namespace: String::new(),
        registry: REGISTRY.into(),
        pull_policy: "IfNotPresent".into(),
        pull_secrets: vec!["registry-credentials".into()],
        runtime_class: Some("gvisor".into()),
        ephemeral_storage: 2 << 30,
        workspace_size: 1 << 30,
        active_deadline: Duration::from_secs(3600),
        start_timeout: Duration::from_secs(60),
    }
}

async fn backend(fake: &FakePods) -> (KubernetesBackend, String) {
    let instance = common::unique("test-kube");
    let backend = KubernetesBackend::with_client(
        fake.client(),
        common::shipped_config().sandbox,
        pods_config(),
        instance.clone(),
    )
    .owned_by("daemon-a")
    .with_editor(common::editor_binary());
    (backend, instance)
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "hello from the host\n").unwrap();
    std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
    std::fs::write(dir.path().join("src/deep/lib.rs"), "pub fn f() {}\n").unwrap();
    let script = dir.path().join("run.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

async fn read_all(mut reader: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut text = String::new();
    reader.read_to_string(&mut text).await.unwrap();
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_sandbox_passes_restricted_and_runs_copies_and_streams_over_exec() {
    common::ensure_images().await;
    let fake = FakePods::start(common::docker().await, REGISTRY, true).await;
    let (backend, _) = backend(&fake).await;
    let ws = workspace();
    let spec = common::spec(&common::base_image());
    let sandbox = backend.prepare(&spec, Some(ws.path())).await.unwrap();

    // The pod as sent: restricted, its own network policy, no token.
    let pods = fake.pods();
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    let s = &pod["spec"];
    let c = &s["containers"][0];
    assert_eq!(s["automountServiceAccountToken"], false);
    assert_eq!(s["enableServiceLinks"], false);
    assert_eq!(s["restartPolicy"], "Never");
    assert_eq!(s["activeDeadlineSeconds"], 3600);
    assert_eq!(s["runtimeClassName"], "gvisor");
    assert_eq!(s["imagePullSecrets"][0]["name"], "registry-credentials");
    assert_eq!(s["securityContext"]["runAsNonRoot"], true);
    assert_eq!(s["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(c["image"], format!("{REGISTRY}/{}", common::base_image()));
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["runAsUser"], 1000);
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        assert!(c["resources"]["limits"][resource].is_string(), "{resource} limit");
    }
    for volume in s["volumes"].as_array().unwrap() {
        assert!(volume["emptyDir"]["sizeLimit"].is_string(), "{volume}");
    }
    assert_eq!(pod["metadata"]["annotations"]["io.forgehand/task"], spec.task_id);
    let policies = fake.policies();
    assert_eq!(policies.len(), 1);
    assert_eq!(
        policies[0]["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert!(policies[0]["spec"]["egress"].is_null() && policies[0]["spec"]["ingress"].is_null());

    // The workspace arrived whole, owned by the sandbox user, runnable.
    let out = sandbox
        .exec("cat README.md src/deep/lib.rs && ./run.sh && id -u && pwd", None)
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout,
        "hello from the host\npub fn f() {}\nran\n1000\n/workspace/project\n"
    );
    // Commands run over the supervisor (the editor was copied in) and the
    // sandbox has its tunnel; exit codes and timeouts are real.
    assert!(sandbox.editor_path().is_some());
    assert!(sandbox.egress().is_some());
    let failed = sandbox
        .exec("echo out; echo err >&2; exit 3", None)
        .await
        .unwrap();
    assert_eq!(
        (failed.exit_code, failed.stdout.as_str(), failed.stderr.as_str()),
        (Some(3), "out\n", "err\n")
    );
    let slow = sandbox
        .exec("sleep 30", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    assert!(slow.timed_out && slow.exit_code.is_none(), "{slow:?}");
    let network = sandbox.exec("ls /sys/class/net", None).await.unwrap();
    assert_eq!(network.stdout.trim(), "lo", "the pod has no network but loopback");

    // A streamed process: input in, output back, the end of input ends it.
    let mut stream = sandbox
        .exec_stream(&["sh".into(), "-c".into(), "tr a-z A-Z; exit 7".into()])
        .await
        .unwrap();
    stream.stdin.write_all(b"streamed\n").await.unwrap();
    stream.stdin.shutdown().await.unwrap();
    assert_eq!(read_all(&mut stream.stdout).await, "STREAMED\n");
    let status = common::exec_ended(sandbox.as_ref(), &stream.id).await;
    assert_eq!((status.running, status.exit_code), (false, Some(7)));

    // Files put and trees copied back out.
    sandbox
        .put_file("/workspace/project/notes/new.txt", b"put\n", 0o644)
        .await
        .unwrap();
    sandbox.exec("echo changed >> README.md", None).await.unwrap();
    let dest = sandbox_tree::read(sandbox.as_ref(), "/workspace/project")
        .await
        .unwrap();
    assert_eq!(dest.text("README.md"), "hello from the host\nchanged\n");
    assert_eq!(dest.text("notes/new.txt"), "put\n");
    assert_eq!(dest.text("src/deep/lib.rs"), "pub fn f() {}\n");
    let outside = sandbox.put_file("/etc/passwd", b"x", 0o644).await.unwrap_err();
    assert!(
        matches!(outside, SandboxError::OutsideWorkspace { .. }),
        "{outside}"
    );
    let missing = sandbox_tree::read(sandbox.as_ref(), "/workspace/nothing-here")
        .await
        .unwrap_err();
    assert!(
        missing.to_string().contains("no such path in the sandbox"),
        "{missing}"
    );

    sandbox.remove().await.unwrap();
    assert!(fake.pods().is_empty());
    sandbox.remove().await.unwrap();
    common::kube_validate(&fake.bodies());
    fake.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_of_a_repository_with_a_credential_trusts_its_relays_ca() {
    common::ensure_images().await;
    let fake = FakePods::start(common::docker().await, REGISTRY, true).await;
    let spec = common::spec(&common::base_image());
    let credentials = "sandbox:\n  egress:\n    credentials:\n      - host: \"registry.test:443\"\n        value_from: CORP_TOKEN\n        scheme: bearer\n        repositories: [\"tests/*\"]\n";
    let root = common::repo_root();
    let with_credential =
        forgehand::config::Config::from_yaml(credentials, &root.join("credentials.yaml"), &root, &|name| {
            (name == "CORP_TOKEN").then(|| "token-31337-never-in-a-pod".to_owned())
        })
        .unwrap();
    let mut sandbox_config = common::shipped_config().sandbox;
    sandbox_config.egress_credentials = with_credential.sandbox.egress_credentials;
    let backend = KubernetesBackend::with_client(
        fake.client(),
        sandbox_config,
        pods_config(),
        common::unique("test-kube"),
    )
    .owned_by("daemon-a")
    .with_editor(common::editor_binary());
    let sandbox = backend.prepare(&spec, None).await.unwrap();

    let pods = fake.pods();
    let env = &pods[0]["spec"]["containers"][0]["env"];
    let value_of = |name: &str| {
        env.as_array()
            .unwrap()
            .iter()
            .find(|pair| pair["name"] == name)
            .map(|pair| pair["value"].as_str().unwrap().to_owned())
    };
    assert_eq!(
        value_of("SSL_CERT_FILE").as_deref(),
        Some("/tmp/.forgehand-egress/ca-bundle.pem"),
        "{env}"
    );
    assert!(value_of("JAVA_TOOL_OPTIONS").is_some(), "{env}");
    assert!(value_of("JAVA_TOOL_OPTIONS")
        .unwrap()
        .contains("-Djavax.net.ssl.trustStore=/tmp/.forgehand-egress/cacerts"));
    // The CA the relay signs with was written in the pod, after the roots.
    let ca = sandbox.egress().unwrap().ca_pem().unwrap().trim_end().to_owned();
    let out = sandbox
        .exec(
            "cat /tmp/.forgehand-egress/egress-ca.pem; echo ===; cat /tmp/.forgehand-egress/ca-bundle.pem",
            None,
        )
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    let (alone, bundle) = out.stdout.split_once("===\n").unwrap();
    assert_eq!(alone.trim_end(), ca);
    assert!(
        bundle.trim_end().ends_with(&ca) && bundle.len() > ca.len() * 2,
        "{bundle}"
    );
    assert!(!fake
        .bodies()
        .iter()
        .any(|b| b.to_string().contains("token-31337")));

    sandbox.remove().await.unwrap();
    fake.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v4_only_server_still_gets_whole_copies_and_exit_codes() {
    common::ensure_images().await;
    let fake = FakePods::start(common::docker().await, REGISTRY, false).await;
    let (backend, _) = backend(&fake).await;
    let ws = workspace();
    let sandbox = backend
        .prepare(&common::spec(&common::base_image()), Some(ws.path()))
        .await
        .unwrap();
    let out = sandbox.exec("cat src/deep/lib.rs; exit 4", None).await.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (Some(4), "pub fn f() {}\n"));
    sandbox
        .put_file("/workspace/project/x.txt", b"v4\n", 0o600)
        .await
        .unwrap();
    let back = sandbox_tree::read(sandbox.as_ref(), "/workspace/project")
        .await
        .unwrap();
    assert_eq!(back.text("x.txt"), "v4\n");
    assert_eq!(back.text("README.md"), "hello from the host\n");
    sandbox.remove().await.unwrap();
    fake.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_that_cannot_be_pulled_fails_at_once_names_the_image_and_leaves_no_pod() {
    let fake = FakePods::start(common::docker().await, REGISTRY, true).await;
    let (backend, _) = backend(&fake).await;
    let started = std::time::Instant::now();
    let err = backend
        .prepare(&common::spec("forgehand/no-such-image:never"), None)
        .await
        .err()
        .expect("no pod can start from a missing image");
    let text = err.to_string();
    assert!(text.contains("ErrImagePull"), "{text}");
    assert!(text.contains("images.registry"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30), "it failed fast");
    assert!(fake.pods().is_empty(), "the failed pod was deleted");
    fake.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn leftovers_are_replaced_and_reaped_and_other_daemons_pods_are_left_alone() {
    common::ensure_images().await;
    let fake = FakePods::start(common::docker().await, REGISTRY, true).await;
    let (backend, instance) = backend(&fake).await;
    let spec = common::spec(&common::base_image());
    let first = backend.prepare(&spec, None).await.unwrap();
    first.exec("echo first > /workspace/mark", None).await.unwrap();
    // The daemon restarts: the same task gets a fresh pod, never two.
    let second = backend.prepare(&spec, None).await.unwrap();
    assert_eq!(fake.pods().len(), 1);
    let mark = second.exec("cat /workspace/mark", None).await.unwrap();
    assert!(!mark.success(), "the leftover pod was replaced, not reused");

    // Another daemon of the same instance on the same namespace.
    let other = KubernetesBackend::with_client(
        fake.client(),
        common::shipped_config().sandbox,
        pods_config(),
        instance,
    )
    .owned_by("daemon-b");
    let theirs = other
        .prepare(&common::spec(&common::base_image()), None)
        .await
        .unwrap();
    assert_eq!(fake.pods().len(), 2);

    assert!(backend
        .reap(std::slice::from_ref(&spec.task_id))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(backend.reap(&[]).await.unwrap(), vec![spec.task_id.clone()]);
    let left = fake.pods();
    assert_eq!(left.len(), 1, "only this daemon's pod was reaped");
    assert_eq!(left[0]["metadata"]["labels"]["io.forgehand/daemon"], "daemon-b");
    theirs.remove().await.unwrap();
    backend.ping().await.unwrap();
    // A busy API server costs a retry; a refusal says what to grant.
    fake.fail_next(1, 503);
    backend.ping().await.unwrap();
    fake.fail_next(1, 403);
    let err = backend.ping().await.unwrap_err();
    assert!(
        !err.is_retryable() && err.to_string().contains("role.yaml"),
        "{err}"
    );
    fake.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_names_each_verb_the_identity_lacks_and_a_missing_namespace() {
    let fake = FakePods::start(common::docker().await, REGISTRY, true).await;
    let mut config = common::shipped_config();
    config.cluster.mode = forgehand::config::ClusterMode::Kubernetes;
    config.sandbox.backend = forgehand::config::SandboxBackendChoice::Kubernetes(pods_config());
    let checks = forgehand::doctor::kubernetes::checks(&fake.client(), &config).await;
    let by_name = |name: &str| {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} in {checks:?}"))
            .clone()
    };
    assert!(by_name("kubernetes").detail.contains("1.33"));
    assert_eq!(
        by_name("namespace default").status,
        forgehand::doctor::Status::Pass
    );
    let access = by_name("access in default");
    assert_eq!(access.status, forgehand::doctor::Status::Pass, "{access:?}");
    common::kube_validate(&fake.bodies());

    fake.deny("create pods/exec");
    fake.deny("update leases");
    config.cluster.namespace = "claims".into();
    let checks = forgehand::doctor::kubernetes::checks(&fake.client(), &config).await;
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c.status == forgehand::doctor::Status::Fail)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(
        failed[0].starts_with("namespace claims: does not exist"),
        "{failed:?}"
    );
    assert!(failed[1].contains("not allowed: update leases"), "{failed:?}");
    assert!(failed[2].contains("not allowed: create pods/exec"), "{failed:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_existing_policy_that_lets_traffic_through_stops_every_sandbox() {
    use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyEgressRule};
    common::ensure_images().await;
    let fake = FakePods::start(common::docker().await, REGISTRY, true).await;
    // Someone made a policy of forgehand's name that lets egress out.
    let mut open = forgehand::sandbox::kubernetes::pod_spec::deny_all_policy();
    open.spec.as_mut().unwrap().egress = Some(vec![NetworkPolicyEgressRule::default()]);
    kube::Api::<NetworkPolicy>::namespaced(fake.client(), "default")
        .create(&kube::api::PostParams::default(), &open)
        .await
        .unwrap();
    let (backend, _) = backend(&fake).await;
    let err = backend
        .prepare(&common::spec(&common::base_image()), None)
        .await
        .err()
        .expect("no sandbox behind a policy that lets traffic out");
    let text = err.to_string();
    assert!(
        text.contains("does not deny sandbox pods all traffic: it allows some egress"),
        "{text}"
    );
    assert!(
        text.contains("kubectl -n default delete networkpolicy forgehand-sandbox-deny-all"),
        "{text}"
    );
    assert!(fake.pods().is_empty(), "no pod was made");
    fake.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_warns_while_sandboxes_share_the_daemons_namespace_and_the_probe_finds_the_policy_holding() {
    common::ensure_images().await;
    let fake = FakePods::start(common::docker().await, REGISTRY, true).await;
    let mut config = common::shipped_config();
    config.sandbox.backend = forgehand::config::SandboxBackendChoice::Kubernetes(pods_config());
    let status_of = |checks: &[forgehand::doctor::Check], name: &str| {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} in {checks:?}"))
            .clone()
    };
    let shared = forgehand::doctor::kubernetes::checks(&fake.client(), &config).await;
    let isolation = status_of(&shared, "sandbox namespace");
    assert_eq!(isolation.status, forgehand::doctor::Status::Warn, "{isolation:?}");
    assert!(isolation.detail.contains("sandbox.kubernetes.namespace"));
    let policy = status_of(&shared, "network policy");
    assert!(policy.detail.contains("--probe-network"), "{policy:?}");
    let mut own = pods_config();
    own.namespace = "sandboxes".into();
    config.sandbox.backend = forgehand::config::SandboxBackendChoice::Kubernetes(own);
    let apart = forgehand::doctor::kubernetes::checks(&fake.client(), &config).await;
    assert_eq!(
        status_of(&apart, "sandbox namespace").status,
        forgehand::doctor::Status::Pass
    );
    // A real pod tries the API server (network-none containers here: the
    // policy "holds"), and is gone afterwards.
    let (backend, _) = backend(&fake).await;
    let (host, port) = fake.url().trim_start_matches("http://").rsplit_once(':').unwrap();
    let project = tempfile::tempdir().unwrap();
    let pod = forgehand::doctor::network_probe::ProbePod {
        backend: &backend,
        image: &common::base_image(),
        project: project.path(),
    };
    let probed = forgehand::doctor::network_probe::probe(pod, host, port.parse().unwrap()).await;
    assert_eq!(probed.status, forgehand::doctor::Status::Pass, "{probed:?}");
    assert!(fake.pods().is_empty(), "the probe's pod was removed");
    fake.cleanup().await;
}
