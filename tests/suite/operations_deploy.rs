//! The Kubernetes manifests build with kustomize and validate offline
//! against the Kubernetes OpenAPI schemas (`kubernetes-validate`, which
//! ships them); the Deployment probes the daemon's own endpoints.
//! `scripts/dev-env.sh` installs both tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use std::path::PathBuf;
use std::process::Command;

/// `kubectl kustomize dir`, which must build.
fn build(dir: &std::path::Path) -> String {
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl (Debian's kubernetes-client; scripts/dev-env.sh installs it)");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    String::from_utf8(built.stdout).unwrap()
}

/// Checks every resource of `yaml` (and `extra` files) strictly against
/// the schemas; returns how many passed.
fn validate(yaml: &str, extra: &[PathBuf]) -> usize {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("built.yaml");
    std::fs::write(&out, yaml).unwrap();
    let checked = Command::new(common::kube_validator())
        .arg("--strict")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(checked.status.success(), "{report}");
    report.matches(" passed for resource ").count()
}

#[test]
fn the_manifests_build_with_kustomize_and_validate_against_the_schemas() {
    let root = common::repo_root();
    let dir = root.join("deploy/kubernetes");
    // The top folder is the single-node overlay.
    let yaml = build(&dir);
    assert_eq!(yaml, build(&dir.join("overlays/single-node")));
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "PersistentVolumeClaim",
        "Deployment",
        "Service",
    ] {
        assert!(yaml.contains(&format!("kind: {kind}\n")), "{kind} in\n{yaml}");
    }
    assert!(
        !yaml.contains("kind: Secret\n"),
        "the Secret template stays out of the build"
    );
    for probe in [
        "path: /healthz",
        "path: /readyz",
        "prometheus.io/scrape: \"true\"",
        "listen: \"0.0.0.0:9464\"",
    ] {
        assert!(yaml.contains(probe), "{probe}");
    }
    assert_eq!(validate(&yaml, &[dir.join("secret.template.yaml")]), 7);
    takes_the_http_token_from_the_secret(&yaml);
}

/// The Deployment's daemon gets `FORGEHAND_HTTP_TOKEN` from the Secret by
/// name (a missing key stops the pod, not only a missing Secret): it
/// listens on 0.0.0.0, where it refuses to start without the token.
fn takes_the_http_token_from_the_secret(yaml: &str) {
    let deployment = yaml
        .split("\n---\n")
        .map(|doc| yaml_serde::from_str::<serde_json::Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "Deployment")
        .unwrap();
    let daemon = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "forgehand")
        .unwrap();
    let token = daemon["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "FORGEHAND_HTTP_TOKEN")
        .unwrap_or_else(|| panic!("no FORGEHAND_HTTP_TOKEN in {daemon}"));
    assert_eq!(
        token["valueFrom"]["secretKeyRef"],
        serde_json::json!({"name": "forgehand-secrets", "key": "FORGEHAND_HTTP_TOKEN"})
    );
    assert!(token["valueFrom"]["secretKeyRef"].get("optional").is_none());
}

/// What the config map's daemon says at start without the token, and with it.
fn refuses_without_the_http_token(config: &forgehand::config::Config) {
    use forgehand::config::Secrets;
    use forgehand::daemon::setup::http_token_problem;
    let problem = http_token_problem(config, &Secrets::from_lookup(&|_| None))
        .expect("a listener on 0.0.0.0 needs the token");
    assert!(
        problem.contains("daemon.http.listen is \"0.0.0.0:9464\""),
        "{problem}"
    );
    let with_token =
        Secrets::from_lookup(&|name| (name == "FORGEHAND_HTTP_TOKEN").then(|| "0123456789abcdef".to_owned()));
    assert_eq!(http_token_problem(config, &with_token), None);
}

#[test]
fn the_cluster_overlay_runs_replicas_with_no_privilege_and_exactly_the_verbs_they_use() {
    let root = common::repo_root();
    let yaml = build(&root.join("deploy/kubernetes/overlays/cluster"));
    for needle in [
        "replicas: 3",
        "pod-security.kubernetes.io/enforce: restricted",
        "kind: PodDisruptionBudget",
        "maxUnavailable: 1",
        "automountServiceAccountToken: true",
        "fieldPath: metadata.uid",
        "mode: \"kubernetes\"",
        "backend: \"kubernetes\"",
    ] {
        assert!(yaml.contains(needle), "{needle} in\n{yaml}");
    }
    for absent in [
        "privileged: true",
        "docker:dind",
        "PersistentVolumeClaim",
        "ClusterRole",
    ] {
        assert!(!yaml.contains(absent), "{absent} in\n{yaml}");
    }
    // Each Role grants what the code calls, per resource, and no more; pods
    // only in the sandboxes' namespace, Leases only in the replicas'.
    let role = |name: &str| -> serde_json::Value {
        yaml.split("\n---\n")
            .map(|doc| yaml_serde::from_str::<serde_json::Value>(doc).unwrap())
            .find(|doc| doc["kind"] == "Role" && doc["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Role {name}"))
    };
    let verbs = |role: &serde_json::Value| -> Vec<(String, Vec<String>)> {
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|rule| {
                let mut verbs: Vec<String> = rule["verbs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect();
                verbs.sort();
                (rule["resources"][0].as_str().unwrap().to_owned(), verbs)
            })
            .collect()
    };
    let (replicas, sandboxes) = (role("forgehand"), role("forgehand-sandboxes"));
    assert_eq!(replicas["metadata"]["namespace"], "forgehand");
    assert_eq!(sandboxes["metadata"]["namespace"], "forgehand-sandboxes");
    let owned = |pairs: &[(&str, &[&str])]| -> Vec<(String, Vec<String>)> {
        pairs
            .iter()
            .map(|(r, v)| ((*r).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
            .collect()
    };
    assert_eq!(
        verbs(&replicas),
        owned(&[("leases", &["create", "delete", "get", "list", "update"])])
    );
    assert_eq!(
        verbs(&sandboxes),
        owned(&[
            ("pods", &["create", "delete", "get", "list"]),
            ("pods/exec", &["create", "get"]),
            ("networkpolicies", &["create", "get"]),
        ])
    );
    // The sandboxes' binding names the replicas' service account in theirs.
    let binding = yaml
        .split("\n---\n")
        .map(|doc| yaml_serde::from_str::<serde_json::Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "RoleBinding" && doc["metadata"]["name"] == "forgehand-sandboxes")
        .unwrap();
    assert_eq!(binding["metadata"]["namespace"], "forgehand-sandboxes");
    assert_eq!(
        binding["subjects"][0],
        serde_json::json!({"kind": "ServiceAccount", "name": "forgehand", "namespace": "forgehand"})
    );
    assert_eq!(validate(&yaml, &[]), 11);
    takes_the_http_token_from_the_secret(&yaml);
    // Its config loads, in cluster mode with sandboxes as pods.
    let loaded = configmap_config("deploy/kubernetes/overlays/cluster/daemon/configmap.yaml");
    refuses_without_the_http_token(&loaded);
    assert_eq!(loaded.cluster.mode, forgehand::config::ClusterMode::Kubernetes);
    match loaded.sandbox.backend {
        forgehand::config::SandboxBackendChoice::Kubernetes(pods) => {
            assert_eq!(pods.namespace, "forgehand-sandboxes")
        }
        other => panic!("{other:?}"),
    }
}

fn configmap_config(path: &str) -> forgehand::config::Config {
    let root = common::repo_root();
    let map = std::fs::read_to_string(root.join(path)).unwrap();
    let start = map.find("config.yaml: |\n").unwrap() + "config.yaml: |\n".len();
    let config: String = map[start..]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    forgehand::config::Config::from_yaml(&config, std::path::Path::new("configmap.yaml"), &root, &|_| None)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_config_in_the_configmap_loads() {
    let loaded = configmap_config("deploy/kubernetes/overlays/single-node/configmap.yaml");
    assert_eq!(loaded.daemon.http_listen.unwrap().port(), 9464);
    refuses_without_the_http_token(&loaded);
}
