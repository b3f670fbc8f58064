//! The Kubernetes manifests build with kustomize and validate offline
//! against the Kubernetes OpenAPI schemas (`kubernetes-validate`, which
//! ships them); the Deployment probes the daemon's own endpoints.
//! `scripts/dev-env.sh` installs both tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;

fn validator() -> PathBuf {
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

#[test]
fn the_manifests_build_with_kustomize_and_validate_against_the_schemas() {
    let root = common::repo_root();
    let dir = root.join("deploy/kubernetes");
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl (Debian's kubernetes-client; scripts/dev-env.sh installs it)");
    let yaml = String::from_utf8(built.stdout).unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
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
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("built.yaml");
    std::fs::write(&out, &yaml).unwrap();
    let checked = Command::new(validator())
        .arg("--strict")
        .arg(&out)
        .arg(dir.join("secret.template.yaml"))
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(checked.status.success(), "{report}");
    assert_eq!(report.matches(" passed for resource ").count(), 7, "{report}");
}

#[test]
fn the_config_in_the_configmap_loads() {
    let root = common::repo_root();
    let map = std::fs::read_to_string(root.join("deploy/kubernetes/configmap.yaml")).unwrap();
    let start = map.find("config.yaml: |\n").unwrap() + "config.yaml: |\n".len();
    let config: String = map[start..]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let loaded =
        forgehand::config::Config::from_yaml(&config, std::path::Path::new("configmap.yaml"), &root, &|_| {
            None
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.daemon.http_listen.unwrap().port(), 9464);
}
