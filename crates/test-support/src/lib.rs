//! What forgehand's integration tests and benchmarks share: fakes of the
//! services that cannot be reached from a test (GitHub, GitLab, the
//! Kubernetes API, the model providers) that speak their real wire format,
//! rigs that run the daemon against them, and helpers for the real Docker
//! engine. Nothing here skips: without an engine a test fails with a
//! message saying how to get one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod browser;
pub mod conversation;
pub mod daemon_rig;
pub mod debate_model;
pub mod eval_fixture;
pub mod fake_ci;
pub mod fake_github;
pub mod fake_gitlab;
pub mod fake_http;
pub mod fake_kube;
pub mod fake_lfs;
pub mod fake_pods;
pub mod git_http;
pub mod git_rules;
pub mod github_api;
pub mod github_body;
pub mod github_graphql;
pub mod github_world;
pub mod gitlab_api;
pub mod gitlab_world;
pub mod kubeconfig;
pub mod mcp_client;
pub mod metrics_text;
pub mod private_registry;
pub mod registries;
pub mod sample_workspace;
pub mod sandbox_tree;
pub mod scripted_model;
pub mod stats;
pub mod webhook_sender;

use bollard::Docker;
use forgehand::config::{Config, SandboxConfig, EDITOR_BINARY_ENV};
use forgehand::images;
use forgehand::sandbox::docker::{connect, DockerBackend};
use forgehand::sandbox::helper::{self, EditorBinary};
use forgehand::sandbox::{Sandbox, SandboxBackend, SandboxSpec};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::OnceCell;

/// The repository's top folder (config.yaml, images/, scripts/).
pub fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .nth(2)
        .expect("crates/test-support is two folders down")
        .to_owned()
}

/// A binary of the workspace (`forgehand`), built beside the test or
/// benchmark executable that asks (`target/<profile>/deps/..`).
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable is in target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing; cargo builds it with the tests (cargo test, cargo bench)",
        path.display()
    );
    path
}

/// The shipped config.yaml, read without the process environment.
pub fn shipped_config() -> Config {
    let path = repo_root().join("config.yaml");
    let text = std::fs::read_to_string(&path).expect("config.yaml is readable");
    Config::from_yaml(&text, &path, &repo_root(), &|_| None).expect("config.yaml loads")
}

pub async fn docker() -> Docker {
    match connect(&shipped_config().docker).await {
        Ok(docker) => docker,
        Err(err) => panic!(
            "these tests need a running Docker engine and found none: {err}\n\
             Run `scripts/test` (it installs and starts one), or `scripts/dev-env.sh` to only prepare the machine."
        ),
    }
}

static EDITOR: std::sync::OnceLock<EditorBinary> = std::sync::OnceLock::new();

/// The static editor: `FORGEHAND_EDITOR_BINARY`, else what scripts/build-editor
/// makes (built here when it is missing).
pub fn editor_binary() -> EditorBinary {
    EDITOR
        .get_or_init(|| {
            if let Some(path) = std::env::var_os(EDITOR_BINARY_ENV) {
                return EditorBinary::load(Path::new(&path)).expect("FORGEHAND_EDITOR_BINARY loads");
            }
            let out = std::process::Command::new(repo_root().join("scripts/build-editor"))
                .output()
                .expect("scripts/build-editor runs");
            assert!(
                out.status.success(),
                "scripts/build-editor failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            EditorBinary::load(Path::new(&path)).expect("the built editor loads")
        })
        .clone()
}

static BUILT: OnceCell<()> = OnceCell::const_new();

/// Makes sure every image in images/ is built (a cached no-op when it is).
pub async fn ensure_images() {
    BUILT
        .get_or_init(|| async {
            let docker = docker().await;
            let config = shipped_config().images;
            for name in images::available_images(&config).expect("images/ is readable") {
                let tag = images::image_tag(&config, &name);
                let label = docker
                    .inspect_image(&tag)
                    .await
                    .ok()
                    .and_then(|info| info.config)
                    .and_then(|c| c.labels)
                    .and_then(|l| l.get(helper::IMAGE_LABEL).cloned());
                // Missing, or carrying another build of the editor: (re)build.
                if label.as_deref() != Some(editor_binary().sha256()) {
                    let mut quiet = |_: &str, _: &str| {};
                    images::build_images(
                        &docker,
                        &config,
                        &editor_binary(),
                        std::slice::from_ref(&name),
                        images::BuildCache::Use,
                        &mut quiet,
                    )
                    .await
                    .unwrap_or_else(|e| panic!("building {tag} failed: {e}"));
                }
            }
        })
        .await;
}

pub fn base_image() -> String {
    images::image_tag(&shipped_config().images, "base")
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A name unique to this test process and call, so parallel tests (and
/// parallel test binaries) never share containers.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A backend with its own instance id, so its reaper only sees its own.
pub async fn backend_with(config: SandboxConfig) -> (DockerBackend, String) {
    let instance = unique("test");
    (
        DockerBackend::new(docker().await, config, instance.clone()),
        instance,
    )
}

pub async fn backend() -> (DockerBackend, String) {
    backend_with(shipped_config().sandbox).await
}

/// How a streamed process of `sandbox` ended, polled for up to 5 s
/// (`running` still true when it had not).
pub async fn exec_ended(sandbox: &dyn Sandbox, exec_id: &str) -> forgehand::sandbox::ExecStatus {
    let mut status = sandbox.exec_status(exec_id).await.unwrap();
    for _ in 0..50 {
        if !status.running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        status = sandbox.exec_status(exec_id).await.unwrap();
    }
    status
}

pub fn spec(image: &str) -> SandboxSpec {
    SandboxSpec {
        task_id: unique("task"),
        forge: "local".into(),
        repository: "tests/forgehand".into(),
        image: image.into(),
        env: Vec::new(),
    }
}

/// Starts a sandbox on the base image, optionally with a workspace.
pub async fn base_sandbox(backend: &DockerBackend, workspace: Option<&Path>) -> Box<dyn Sandbox> {
    ensure_images().await;
    backend
        .prepare(&spec(&base_image()), workspace)
        .await
        .unwrap_or_else(|e| panic!("sandbox did not start: {e}"))
}

/// Ids of containers carrying `label=value`, running or not.
pub async fn containers_with_label(docker: &Docker, label: &str, value: &str) -> Vec<String> {
    use bollard::query_parameters::ListContainersOptionsBuilder;
    let filters = std::collections::HashMap::from([("label", vec![format!("{label}={value}")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .expect("list containers")
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

/// `kubernetes-validate`, as `scripts/dev-env.sh` installs it.
pub fn kube_validator() -> PathBuf {
    let state = std::env::var_os("FORGEHAND_DEV_STATE")
        .map_or_else(|| PathBuf::from("/tmp/forgehand-dev"), PathBuf::from);
    let path = state.join("validate-venv/bin/kubernetes-validate");
    assert!(
        path.is_file(),
        "{} is missing; run scripts/dev-env.sh",
        path.display()
    );
    path
}

/// Every body is valid against the Kubernetes 1.33 schemas, strictly
/// (no unknown field).
pub fn kube_validate(bodies: &[serde_json::Value]) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let path = dir.path().join(format!("body-{i}.json"));
        let mut body = body.clone();
        // Access reviews are never stored and have no name; the validator
        // wants one to report by.
        if body["kind"] == "SelfSubjectAccessReview" && body["metadata"]["name"].is_null() {
            body["metadata"] = serde_json::json!({"name": format!("review-{i}")});
        }
        std::fs::write(&path, body.to_string()).unwrap();
        files.push(path);
    }
    let out = std::process::Command::new(kube_validator())
        .args(["--strict", "--kubernetes-version", "1.33"])
        .args(&files)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(
        report.matches(" passed for resource ").count(),
        bodies.len(),
        "{report}"
    );
}
